"""Issue 38: E of an AutoExperiment task runs the benchmark's own command (its refsol) on the constructed tree and
reads the answer where the reference's own run of that command shows it (bench_core/scoring/reference_answer.py).

The end-to-end test imports a real AutoExperiment-format row (JSONL plus the paper's `code/` folder, written here)
whose refsol prints only logs and writes a metrics file, as the real ones do; gold passes E on the constructed tree,
null fails, and an agent whose run script prints the expected answer without implementing anything fails too (its
script is not what E runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.scoring.evidence.reference_answer import derive, needs_reader, read
from failatlas.bench_core.tasks.model import ExpectedMetric, RunSpec, TaskSpec

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

LOG = """start timer
device: cpu
Experiment 1
epoch 1 loss 0.6931
epoch 2 loss 0.5120
val accuracy: 0.8123 (best 0.8123)
Experiment 2
epoch 1 loss 0.7001
epoch 2 loss 0.4022
val accuracy: 0.9050 (best 0.9050)
"""


def _task(**metrics) -> TaskSpec:
    return TaskSpec(id="t", benchmark="autoexperiment", kind="masked_functions", question="q",
                    run=RunSpec(command="bash run.sh", answer="stdout_json", agent_script=True),
                    expected_results=[ExpectedMetric(name=n, value=v[0], rtol=0.05, experiment=v[1])
                                      for n, v in metrics.items()])


def test_the_reader_finds_each_value_where_the_reference_printed_it_and_reads_a_rerun_there():
    task = _task(**{"Experiment 1.acc": (0.81, "Experiment 1"), "Experiment 2.acc": (0.90, "Experiment 2"),
                    "Experiment 2.IoU": (0.0456, "Experiment 2")})
    reader = derive(task, LOG, {"outputs/metrics.txt": "IoU=0.0457\n"})
    assert reader.ok, reader.notes
    rerun = LOG.replace("0.8123 (best", "0.5000 (best").replace("0.9050 (best 0.9050)", "0.9049 (best 0.9050)")
    got = read(reader, "extra line 1.0\n" + rerun, {"outputs/metrics.txt": "IoU=0.0460\n"})
    assert got == {"Experiment 1.acc": 0.5, "Experiment 2.acc": 0.9049, "Experiment 2.IoU": 0.046}
    assert read(reader, "nothing printed", {}) == {}


def test_a_value_the_reference_run_does_not_show_gives_no_reader():
    reader = derive(_task(**{"Experiment 1.acc": (0.33, "Experiment 1")}), LOG, {})
    assert not reader.ok and "no value within tolerance" in reader.notes[0]


CODE = {
    "model.py": '''"""A tiny model."""

import numpy as np


def score(weights, x):
    """Dot product of the weights with each row of x, squashed by a logistic."""
    return 1.0 / (1.0 + np.exp(-(x @ weights)))
''',
    "train.py": '''"""Train and report, as research code does: logs on stdout, metrics in a file."""

import argparse
import os

import numpy as np

from model import score

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
rng = np.random.default_rng(args.seed)
x = rng.normal(size=(200, 5))
w = rng.normal(size=5)
y = (x @ w > 0).astype(float)
print("start timer")
for epoch in range(1, 3):
    print(f"epoch {epoch} loss {0.7 / epoch:.4f}")
p = score(w * 0.5, x)
print(f"val accuracy: {np.mean((p > 0.5) == y):.4f}")
os.makedirs("outputs", exist_ok=True)
with open("outputs/metrics.txt", "w") as handle:
    handle.write(f"mean_prob={p.mean():.4f}\\n")
''',
}
SOLUTION = "echo Experiment 1\npython3 train.py --seed 1\necho Experiment 2\npython3 train.py --seed 2\n"


def _reference_values(code: Path) -> dict:
    out = {}
    for k, seed in ((1, 1), (2, 2)):
        printed = subprocess.run([sys.executable, "train.py", "--seed", str(seed)], cwd=code, capture_output=True,
                                 text=True, check=True).stdout
        acc = float(printed.strip().splitlines()[-1].split()[-1])
        mean_prob = float((code / "outputs" / "metrics.txt").read_text().split("=")[1])
        out[f"Experiment {k}"] = {"acc": acc, "mean_prob": mean_prob}
    return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    from failatlas.bench_core.tasks import run as import_tasks
    from failatlas.bench_core.tasks.stage import TaskImportParams
    from failatlas.store import open_store

    root = tmp_path_factory.mktemp("refsol")
    code = root / "rows" / "9999.00001" / "code"
    code.mkdir(parents=True)
    for name, text in CODE.items():
        (code / name).write_text(text)
    results = _reference_values(code)
    (code / "outputs" / "metrics.txt").unlink()
    row = {"paper_id": "9999.00001", "func_ids": "0",
           "func_details": [{"func_id": "0", "name": "score", "file": "model.py", "header_line": 6, "line_start": 7,
                             "line_end": 8, "description": "Dot product of the weights with each row of x, squashed "
                             "by a logistic."}],
           "experiments": "Experiment 1: accuracy with seed 1.\nExperiment 2: accuracy with seed 2.\nReturn final "
                          "answer as a json: {\"Experiment 1\": ..., \"Experiment 2\": ...}",
           "solution": SOLUTION, "results": results}
    rows = root / "rows" / "mlrc_n=1.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    store = open_store(root / "store.duckdb")
    import_tasks(store, TaskImportParams(paths=[rows]))
    [task_id] = [r[0] for r in store.query("SELECT id FROM tasks")]
    answer = json.dumps(results)
    forger = f"mkdir -p .failatlas && printf '%s\\n' 'echo {answer!s}' > .failatlas/run.sh"
    labels = {}
    for label, agent, params in (("gold", "gold", {}), ("null", "null", {}),
                                 ("forger", "command", {"command": forger})):
        before = {r[0] for r in store.query("SELECT id FROM runs")}
        runs.run(store, runs.BenchParams(agent=agent, agent_params=params, task_ids=[task_id], sandbox="local",
                                         runs_dir=root / "runs"))
        [run_id] = {r[0] for r in store.query("SELECT id FROM runs")} - before
        labels[label] = run_id
    result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=root / "runs", llm=False))
    assert result.infra_errors == [] and result.unavailable == [] and result.failed == []
    out = {}
    for label, run_id in labels.items():
        [v] = store.query_dicts("SELECT outcome, detail, evidence, command FROM validations WHERE run_id = ?",
                                [run_id])
        v["evidence"] = json.loads(v["evidence"] or "{}")
        out[label] = v
    return out, root


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch):
    for name in list(os.environ):
        if name.startswith("FAILATLAS_LLM"):
            monkeypatch.delenv(name)


def test_gold_passes_e_by_the_benchmarks_own_command_on_the_constructed_tree(scored):
    out, root = scored
    gold = out["gold"]
    assert gold["outcome"] == "passed", gold
    assert gold["evidence"]["tree"] == "constructed" and gold["command"] == SOLUTION
    assert any("mean_prob: outputs/metrics.txt" in r for r in gold["evidence"]["reader"])
    assert list((root / "derived-tests").glob("answer-*.json")), "the reader is cached beside the store"


@pytest.mark.parametrize("label", ["null", "forger"])
def test_nothing_implemented_fails_e_whatever_the_agents_script_prints(scored, label):
    out, _ = scored
    assert out[label]["outcome"] != "passed", out[label]
    assert out[label]["evidence"]["tree"] == "constructed"


def test_which_tasks_read_their_own_command():
    task = _task(**{"Experiment 1.acc": (0.8, "Experiment 1")})
    assert not needs_reader(task)  # nothing masked
    task.masking.functions = [{"path": "model.py", "qualname": "score"}]
    task = TaskSpec.model_validate(task.model_dump())
    assert needs_reader(task)

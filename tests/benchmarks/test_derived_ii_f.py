"""Derived tests on a real task's tensors (AutoExperiment 2205.00048, masked `II_F` of
`src/utils/evaluation_functions/fairness_metrics.py`, which takes and returns torch tensors): a driver runs the
paper's own code on the MovieLens stand-in (benchmarks/standin_ml1m.py), read in place from the shared data; only
the masked file is copied into the recorded tree, since the recorder wraps functions of files inside the tree. The
calls recorded there are replayed through the hidden-test boundary on the reference `II_F` (passes), on one within
the tolerance (passes) and on wrong ones (fail)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from failatlas.bench_core.hidden import record
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import pandas  # noqa: E402,F401 - the paper's code needs them; scripts/setup.sh installs all three
import scipy  # noqa: E402,F401
import standin_ml1m  # noqa: E402
import torch  # noqa: E402,F401

MASKED = "evaluation_functions/fairness_metrics.py"
TARGETS = [{"path": MASKED, "qualname": "II_F"}]
DRIVER = '''
import sys
from argparse import Namespace

import numpy as np

UTILS = {utils!r}
sys.path[1:1] = [UTILS, UTILS + "/Dataloders"]  # the paper's code in place, after this tree

from MovieLensLoader import MovieLens1M
from evaluation_functions.calculation_utils import build_E_collect, calc_E_system, calc_E_target, calc_num_rel
from evaluation_functions.fairness_metrics import II_F
from evaluation_functions.load_ranking_models import load_deterministic_ranker
import torch

df, item_mapping = MovieLens1M({data!r}).load()
matrix_label = np.zeros((df["user"].nunique(), len(item_mapping)))
liked = df[df["rate"] > 3]
matrix_label[liked["user"].to_numpy(), liked["item"].to_numpy()] = 1.0
for gamma in (0.8, 0.5):
    args = Namespace(data="ml-1m", model="Pop", gamma=gamma, coll="Y", conduct="st")
    run = load_deterministic_ranker(args, item_mapping)
    E_target = calc_E_target(args, matrix_label, calc_num_rel(matrix_label))
    E_collect = build_E_collect(args, E_target)
    E_system = calc_E_system(args, E_target, np.array(list(run["item"])).reshape(-1, 100))
    E_target, E_collect = torch.from_numpy(E_target), torch.from_numpy(E_collect)
    print("II-F:", II_F(E_system, E_target, E_collect, torch.ones(E_target.shape)))
'''


@pytest.fixture(scope="module")
def recorded(shared_data, tmp_path_factory):
    code = shared_data / "autoexperiment" / "MLRC" / "2205.00048" / "code"
    base = tmp_path_factory.mktemp("ii_f")
    data = base / "ml1m"
    standin_ml1m.generate(data, users=30, items=170, seed=2)
    tree = base / "reference"
    (tree / "evaluation_functions").mkdir(parents=True)
    shutil.copyfile(code / "src" / "utils" / MASKED, tree / MASKED)
    (tree / "src" / "models").mkdir(parents=True)
    (tree / "src" / "models" / "ml").symlink_to(data / "runs")  # where the paper's ranker loader reads runs
    (tree / "main.py").write_text(DRIVER.format(utils=str(code / "src" / "utils"), data=str(data)))
    with create_sandbox("local", SandboxSpec(run_id="derived-ii-f", memory_mb=16384), workspace=tree) as sandbox:
        recording = record.record_calls(sandbox, command="python3 main.py", targets=TARGETS, timeout_s=300,
                                        limits=record.Limits(perturb_calls=1))
        assert recording.exit_code == 0, recording.notes
        record.self_check(recording, sandbox, timeout_s=300)
    return tree, recording


def _replay_on(tree: Path, recording, body: str | None, tmp_path: Path):
    agent = tmp_path / "agent"
    shutil.copytree(tree, agent, symlinks=True, ignore=shutil.ignore_patterns(".failatlas-record"))
    if body is not None:
        (agent / MASKED).write_text("import torch\n\n\ndef II_F(E_system, E_target, E_collect, batch_indicator):\n"
                                    + body)
    with create_sandbox("local", SandboxSpec(run_id="derived-ii-f", memory_mb=16384), workspace=agent) as sandbox:
        run = record.replay(recording.cases, sandbox, timeout_s=300)
    assert not run.problems, run.problems
    return {record.test_id(n) for n in run.passed}, run.failures


def test_ii_f_calls_are_recorded_with_their_tensors(recorded):
    _tree, recording = recorded
    assert recording.skipped.get("unencodable", 0) == 0 and recording.skipped.get("too_large", 0) == 0
    assert len(recording.cases) == 4 and recording.unreproducible == 0  # 2 recorded, 2 perturbed
    first = next(c for c in recording.cases if not c["perturbed"])
    e_system = first["args"][0]
    assert e_system.dtype == "float64" and e_system.shape == (30, 170) and e_system.device == "cpu"
    assert [(r.dtype, r.shape) for r in first["ret"]] == [("float64", ())] * 3


REFERENCE_WITHIN_TOLERANCE = """    E_system, E_target = E_system - E_collect, E_target - E_collect
    n = batch_indicator.sum()
    scale = 1 + 1e-9
    return [(E_system - E_target).pow(2).sum() / n * scale, E_system.pow(2).sum() / n * scale,
            2 * (E_system * E_target).sum() / n * scale]
"""
OFF = REFERENCE_WITHIN_TOLERANCE.replace("1e-9", "1e-4")
NO_COLLECT = """    n = batch_indicator.sum()
    return [(E_system - E_target).pow(2).sum() / n, E_system.pow(2).sum() / n, 2 * (E_system * E_target).sum() / n]
"""
MEAN = """    E_system, E_target = E_system - E_collect, E_target - E_collect
    return [(E_system - E_target).pow(2).mean(), E_system.pow(2).mean(), 2 * (E_system * E_target).mean()]
"""
FLOAT32 = REFERENCE_WITHIN_TOLERANCE.replace("scale = 1 + 1e-9", "scale = 1").replace(
    "return [", "return [t.float() for t in [").replace("* scale]", "* scale]]")


@pytest.mark.parametrize(("label", "body", "passes"), [
    ("the paper's II_F", None, 4),
    ("the same within the tolerance", REFERENCE_WITHIN_TOLERANCE, 4),
    ("off by 1e-4", OFF, 0),
    ("E_collect not subtracted", NO_COLLECT, 0),
    ("a mean, right only where the indicator is all ones", MEAN, 2),
    ("float32 results", FLOAT32, 0),
])
def test_the_replay_tells_the_reference_from_wrong_ii_f(recorded, tmp_path, label, body, passes):
    tree, recording = recorded
    passed, failures = _replay_on(tree, recording, body, tmp_path)
    assert len(passed) == passes, (label, failures[:2])
    if passes < len(recording.cases):
        assert "II_F" in failures[0]["message"]

"""Per-paper and per-setting workflow: `bench run` and `tasks validate` select by paper, by the number of masked
functions (AutoExperiment's n) and by task kind; `bench report --by paper` and `--by setting` break the scores
down the same way, in the terminal and the exports."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.runs import select_tasks
from failatlas.bench_core.tasks import TaskImportParams
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import (
    ExpectedMetric,
    FunctionRef,
    Masking,
    PaperMeta,
    RepoRef,
    RunSpec,
    Setting,
    TaskSpec,
)
from failatlas.cli import app
from failatlas.core.errors import NotFoundError

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command


def _rows(shared_data: Path) -> list[dict]:
    """AutoExperiment's rows with their n, read from the files themselves."""
    rows = []
    for n in (0, 1, 2):
        for line in (shared_data / "autoexperiment" / "MLRC" / f"mlrc_n={n}.jsonl").read_text().splitlines():
            if line.strip():
                rows.append({"paper": str(json.loads(line)["paper_id"]), "n": n})
    return rows


@pytest.fixture
def mlrc_store(store, shared_data):
    import_tasks(store, TaskImportParams(paths=[shared_data / "autoexperiment" / "MLRC"]))
    return store


def test_autoexperiment_tasks_are_selected_by_paper_and_by_n(mlrc_store, shared_data):
    rows = _rows(shared_data)
    by_paper = Counter(r["paper"] for r in rows)
    by_n = Counter(r["n"] for r in rows)
    for paper, count in by_paper.items():
        assert len(select_tasks(mlrc_store, papers=[paper])) == count, paper
    for n, count in by_n.items():
        assert len(select_tasks(mlrc_store, masked=n)) == count, n
    both = Counter((r["paper"], r["n"]) for r in rows)
    assert len(select_tasks(mlrc_store, papers=["2303.11932"], masked=2)) == both[("2303.11932", 2)] > 0
    two = sorted(by_paper)[:2]
    assert len(select_tasks(mlrc_store, papers=two)) == sum(by_paper[p] for p in two)
    with pytest.raises(NotFoundError) as missing:
        select_tasks(mlrc_store, papers=["2303.1193"])
    assert "did you mean 2303.11932" in missing.value.one_line()


def test_validate_and_run_take_a_paper_and_n(mlrc_store, shared_data, tmp_path):
    """The paper whose code is not here: decided per task without any run, and `bench run` says why it runs
    none; only the selected rows are touched."""
    expected = sum(1 for r in _rows(shared_data) if r["paper"] == "2309.05569" and r["n"] == 1)
    cli = CliRunner()
    db = str(mlrc_store.path)
    res = cli.invoke(app, ["--db", db, "tasks", "validate", "--paper", "2309.05569", "--masked", "1", "--sandbox",
                           "local", "--runs-dir", str(tmp_path / "runs"), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output[res.output.index("{"):])
    assert report["counts"] == {"autoexperiment": {"repo-unavailable": expected}}
    res = cli.invoke(app, ["--db", db, "bench", "run", "--agent", "null", "--paper", "2309.05569", "--masked", "1",
                           "--sandbox", "local", "--runs-dir", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    assert res.output.count("repository not available") == expected
    assert mlrc_store.query("SELECT count(*) FROM runs") == [(0,)]
    res = cli.invoke(app, ["--db", db, "tasks", "validate", "--paper", "no-such-paper", "--sandbox", "local"])
    assert res.exit_code != 0 and "no task of paper no-such-paper" in res.output


SOURCE = "def predict(x):\n    return 2 * x + 3\n\n\ndef scale(x):\n    return 10 * x\n"
ANSWER = "python3 -c 'import json, model; print(json.dumps({\"acc\": model.predict(1) / 5}))'"


def _task(tmp_path: Path, paper: str, functions: list[str]) -> TaskSpec:
    task_id = f"toy-{paper}-{len(functions)}"
    folder = tmp_path / task_id
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "model.py").write_text(SOURCE)
    (folder / "task.json").write_text("{}")
    return TaskSpec(
        id=task_id, benchmark="toy", kind="masked_functions", question="Implement the model.",
        paper=PaperMeta(id=paper), repository=RepoRef(local_path="repo"), source=str(folder / "task.json"),
        masking=Masking(functions=[FunctionRef(path="model.py", qualname=f) for f in functions]),
        run=RunSpec(command=ANSWER, agent_script=True, answer="stdout_json"),
        expected_results=[ExpectedMetric(name="acc", value=1.0)],
        settings=[Setting(name="partial_code", show_run_command=False), Setting(name="partial_code+refsol")])


def test_the_report_breaks_scores_down_by_paper_and_by_setting(store, tmp_path):
    save_tasks(store, [_task(tmp_path, "p1", ["predict"]), _task(tmp_path, "p1", ["predict", "scale"]),
                       _task(tmp_path, "p2", ["predict"])])
    base = dict(benchmark="toy", sandbox="local", runs_dir=tmp_path / "runs")
    for setting in ("partial_code", "partial_code+refsol"):
        runs.run(store, runs.BenchParams(agent="gold", agent_params={"execute": False}, setting=setting, **base))
    runs.run(store, runs.BenchParams(agent="null", setting="partial_code", **base))
    scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs", llm=False))
    cli = CliRunner()
    out = tmp_path / "out"
    for by in ("paper", "setting"):
        res = cli.invoke(app, ["--db", str(store.path), "bench", "report", "--by", by,
                               "--out", str(out)])
        assert res.exit_code == 0, res.output
    by_paper = {(r["paper_id"], r["agent"]): r for r in csv.DictReader((out / "report_by_paper.csv").open())}
    assert {k: v["runs"] for k, v in by_paper.items()} == {
        ("p1", "gold"): "4", ("p1", "null"): "2", ("p2", "gold"): "2", ("p2", "null"): "1"}
    assert by_paper[("p1", "gold")]["E"] == "1.0" and by_paper[("p1", "null")]["E"] == "0.0"
    by_setting = {(r["setting"], r["n_masked"], r["agent"]): r
                  for r in csv.DictReader((out / "report_by_setting.csv").open())}
    assert {k: v["runs"] for k, v in by_setting.items()} == {
        ("partial_code", "1", "gold"): "2", ("partial_code", "2", "gold"): "1",
        ("partial_code+refsol", "1", "gold"): "2", ("partial_code+refsol", "2", "gold"): "1",
        ("partial_code", "1", "null"): "2", ("partial_code", "2", "null"): "1"}
    assert all(r["kind"] == "masked_functions" for r in by_setting.values())
    md = (out / "report_by_setting.md").read_text()
    assert "| toy | masked_functions | partial_code+refsol | 2 | gold |" in md

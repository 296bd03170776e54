"""`bench report` on real runs (local sandbox, real store): E is not scored, and counted apart with the reason, on a
task whose reference cannot run in this environment, never on the word of an agent's own failing script; every
agent's stored runs and denominators are stated, and runs left out of every score are warned about."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.scoring.report import report_notes, report_table, write_report
from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import ExpectedMetric, RepoRef, RunSpec, TaskSpec

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

ABSENT = "import failatlas_absent_package_q7"  # a third-party package this environment does not have
PRINT_ONE = "python3 -c 'import json; print(json.dumps({\"acc\": 1.0}))'"


def _task(tmp_path: Path, task_id: str, command: str) -> TaskSpec:
    """AutoExperiment's shape: the agent's own run script prints the answer as JSON; the reference command is
    what gold's script runs."""
    folder = tmp_path / task_id
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "model.py").write_text("def predict(x):\n    return 2 * x + 3\n")
    (folder / "task.json").write_text("{}")
    return TaskSpec(id=task_id, benchmark="toy", kind="full_code", question="Is the accuracy one?",
                    repository=RepoRef(local_path="repo"), source=str(folder / "task.json"),
                    run=RunSpec(command=command, agent_script=True, answer="stdout_json"),
                    expected_results=[ExpectedMetric(name="acc", value=1.0)])


def _script_agent(script: str) -> dict:
    """The `command` agent writing `script` as its run script."""
    return {"command": f"mkdir -p .failatlas && printf '%s\\n' \"{script}\" > .failatlas/run.sh"}


@pytest.fixture
def env_store(store, tmp_path):
    save_tasks(store, [_task(tmp_path, "toy-blocked", f"python3 -c '{ABSENT}'"),
                       _task(tmp_path, "toy-runs", PRINT_ONE)])
    base = dict(benchmark="toy", sandbox="local", runs_dir=tmp_path / "runs", gpu_tasks=True)
    runs.run(store, runs.BenchParams(agent="gold", agent_params={"execute": False}, **base))
    runs.run(store, runs.BenchParams(agent="null", **base))
    # an agent whose own script needs a package that is missing: on a task gold can run, its own failure
    runs.run(store, runs.BenchParams(agent="command", agent_params=_script_agent(f"python3 -c '{ABSENT}'"),
                                     task_ids=["toy-runs"], **{k: v for k, v in base.items() if k != "benchmark"}))
    scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs", llm=False))
    return store


def test_e_is_not_scored_where_the_environment_cannot_run_the_reference(env_store, tmp_path):
    scores = {(r["agent"], r["task_id"]): r for r in run_scores(env_store).iter_rows(named=True)}
    for agent in ("gold", "null"):
        row = scores[(agent, "toy-blocked")]
        assert row["E"] is None and row["outcome"] in ("env_setup", "not_run", "runtime_error")
        assert "environment (env-failed)" in row["E_unscored"] and "failatlas_absent_package_q7" in row["E_unscored"]
    assert scores[("gold", "toy-runs")]["E"] == 1 and scores[("gold", "toy-runs")]["E_unscored"] is None
    # the same missing package in the agent's own script is the agent's failure: scored, E = 0
    own = scores[("command", "toy-runs")]
    assert own["outcome"] == "env_setup" and own["E"] == 0 and own["E_unscored"] is None
    # tasks validate reads the runs as they are: gold's E failed, and why
    raw = run_scores(env_store, environment=False).filter(run_scores(env_store, environment=False)["agent"] == "gold")
    assert sorted(raw["E"].to_list()) == [0, 1]

    table = {r["agent"]: r for r in report_table(env_store, by="agent").iter_rows(named=True)}
    assert (table["gold"]["E"], table["gold"]["E_n"], table["gold"]["E_env_n"]) == (1.0, 1, 1)
    assert table["null"]["E_env_n"] == 1
    notes = report_notes(env_store)
    assert any(line.startswith("E not scored, not the agent's failure: 2 run(s) of 1 task(s)") for line in notes)
    md, csv_path, _ = write_report(report_table(env_store, by="agent"), "agent", tmp_path / "out", notes)
    assert "(n=1, left out 1)" in md.read_text() and "env-failed" in md.read_text()
    rows = {r["agent"]: r for r in csv.DictReader(csv_path.open())}
    assert rows["gold"]["E_env_n"] == "1" and rows["gold"]["stored"] == "2"


def test_the_report_states_each_denominator_and_warns_about_runs_in_no_score(env_store, tmp_path):
    # a stored run not scored yet, and one that ended in infra_error: neither may vanish silently
    unscored = runs.run(env_store, runs.BenchParams(agent="null", benchmark="toy", attempts=2, sandbox="local",
                                                    runs_dir=tmp_path / "runs"))
    assert unscored.planned == 2
    with env_store.write() as conn:
        conn.execute("UPDATE runs SET status = 'infra_error', infra_error = 'docker: daemon gone' WHERE id = ("
                     "SELECT id FROM runs WHERE agent = 'null' AND attempt = 2 ORDER BY id LIMIT 1)")
    notes = report_notes(env_store)
    null = next(line for line in notes if line.startswith("null:"))
    assert null.startswith("null: 4 run(s) stored, 2 scored; denominators: M=2, D=0, I=0, E=1, C=0")
    # agents in report order: the reference agents gold and null first, then the others by name
    assert [line.split(":")[0] for line in notes if "run(s) stored" in line] == ["gold", "null", "command"]
    assert report_table(env_store, by="agent")["agent"].to_list() == ["gold", "null", "command"]
    warning = next(line for line in notes if line.startswith("warning: null:"))
    assert "2 of 4 stored run(s) are in no score" in warning and "1 not scored yet" in warning
    assert "1 infra_error" in warning
    assert not any(line.startswith("warning: gold:") for line in notes)

    from failatlas.cli import app

    res = CliRunner().invoke(app, ["--db", str(env_store.path), "bench", "report"], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    assert "warning: null: 2 of 4 stored run(s) are in no score" in " ".join(res.output.split())
    assert "2 of 4" in res.output  # the runs column: scored of stored
    # at 120 columns the denominators wrap between items, never inside one ("M·C·D·I·E" / "2")
    lines = res.output.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("null: 4 run(s) stored"))
    said = lines[start] + "".join(" " + line for line in lines[start + 1:start + 3] if not line.startswith(
        ("warning", "E not", "gold", "command", "null")))
    assert all(len(line) <= 120 for line in lines)
    items = said.split("denominators: ")[1].split(";")[0].split(", ")
    assert [i.split("=")[0] for i in items] == ["M", "D", "I", "E", "C", "I·E", "C·D", "All✓", "All·E✓", "M·C·D·I·E"]
    assert all(re.fullmatch(r"\S+=\d+", i.strip()) for i in items), items


def test_runs_made_in_local_sandboxes_are_marked_unisolated_in_the_report_and_in_bench_show(env_store):
    """`--sandbox local` runs the agent's code as host processes: it could write the store or the derived tests'
    recordings, so its scores hold only for a trusted agent, and every place that shows them says so."""
    from failatlas.cli import app

    warning = next(line for line in report_notes(env_store) if "local sandboxes" in line)
    scored = run_scores(env_store)
    assert warning.startswith(f"warning: {scored.height} scored run(s) ran in local sandboxes, unisolated")
    assert "command 1" in warning and "gold 2" in warning and "null 2" in warning and "trusted" in warning
    # a run made elsewhere is not counted
    with env_store.write() as conn:
        conn.execute("UPDATE runs SET sandbox = 'docker' WHERE agent = 'command'")
    assert "command" not in next(line for line in report_notes(env_store) if "local sandboxes" in line)
    [(local,)] = env_store.query("SELECT id FROM runs WHERE agent = 'gold' AND sandbox = 'local' LIMIT 1")
    [(other,)] = env_store.query("SELECT id FROM runs WHERE agent = 'command' LIMIT 1")
    shown = CliRunner().invoke(app, ["--db", str(env_store.path), "bench", "show", local])
    assert shown.exit_code == 0, shown.output
    assert "sandbox: local: the agent's code runs as host processes" in " ".join(shown.output.split())
    assert "sandbox: local" not in CliRunner().invoke(app, ["--db", str(env_store.path), "bench", "show",
                                                             other]).output

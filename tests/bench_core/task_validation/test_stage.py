"""`tasks validate` end to end on a real store with the local sandbox: the mini suite's tasks are valid, and crafted
broken tasks get the status that names what is wrong (null passes, nothing checkable, no repository, unpreparable)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.sandbox import detect_gpus
from failatlas.bench_core.task_validation import ValidateParams, run
from failatlas.bench_core.tasks import TaskImportParams
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import ExpectedMetric, Masking, RepoRef, RunSpec, TaskSpec

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

WRITE_ONE = "python3 -c 'import json; json.dump({\"acc\": 1.0}, open(\"results.json\", \"w\"))'"


def _bundled_task(tmp_path: Path, task_id: str, **fields) -> TaskSpec:
    """A task whose repository is bundled beside its task file: one module, one script."""
    folder = tmp_path / task_id
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "model.py").write_text("def predict(x):\n    return 2 * x + 3\n")
    (folder / "task.json").write_text("{}")
    base = dict(id=task_id, benchmark="toy", kind="full_code", question="Is the accuracy one?",
                repository=RepoRef(local_path="repo"), source=str(folder / "task.json"))
    return TaskSpec(**{**base, **fields})


@pytest.fixture
def crafted(store, tmp_path):
    tasks = [
        # nothing is masked and the command writes the expected value itself: an agent doing nothing passes
        _bundled_task(tmp_path, "toy-null-passes", run=RunSpec(command=WRITE_ONE, results_file="results.json"),
                      expected_results=[ExpectedMetric(name="acc", value=1.0)]),
        # a command but nothing to compare it with, and no other phase: nothing can be checked
        _bundled_task(tmp_path, "toy-nothing-to-check", run=RunSpec(command="true")),
        # a masked file the repository does not have
        _bundled_task(tmp_path, "toy-unpreparable", kind="T1", masking=Masking(files=["missing.py"])),
        # a repository named only by URL, in no cache
        TaskSpec(id="toy-no-repo", benchmark="toy", kind="T1", question="q",
                 repository=RepoRef(url="https://github.com/example/absent"), masking=Masking(files=["a.py"])),
    ]
    save_tasks(store, tasks)
    return tasks


def test_crafted_broken_tasks_get_the_status_that_names_the_problem(store, tmp_path, crafted):
    result = run(store, ValidateParams(benchmark="toy", sandbox="local", runs_dir=tmp_path / "runs"))
    got = {v.task_id: (v.status, v.reason) for v in result.verdicts}
    assert got["toy-null-passes"][0] == "null-passes", got
    assert got["toy-nothing-to-check"][0] == "not-checkable", got
    assert got["toy-unpreparable"][0] == "prepare-fails" and "missing.py" in got["toy-unpreparable"][1]
    assert got["toy-no-repo"] == ("repo-unavailable", "repository not available: https://github.com/example/absent;"
                                  " add it with `failatlas repos add`")
    stored = dict(store.query("SELECT task_id, status FROM task_validations"))
    assert stored == {k: v[0] for k, v in got.items()}
    # the null-passes verdict rests on two stored, scored runs
    row = store.query_dicts("SELECT gold_run_id, null_run_id FROM task_validations WHERE task_id = 'toy-null-passes'")
    assert all(row[0].values())
    assert store.query("SELECT count(*) FROM validations WHERE run_id IN (?, ?)",
                       [row[0]["gold_run_id"], row[0]["null_run_id"]])[0][0] == 2


def test_validating_again_reuses_the_runs_and_replaces_the_verdicts(store, tmp_path, crafted):
    params = ValidateParams(task_ids=["toy-null-passes"], sandbox="local", runs_dir=tmp_path / "runs")
    first = run(store, params)
    runs = store.query("SELECT count(*) FROM runs")[0][0]
    second = run(store, params)
    assert store.query("SELECT count(*) FROM runs")[0][0] == runs
    assert [v.status for v in first.verdicts] == [v.status for v in second.verdicts] == ["null-passes"]
    assert store.query("SELECT count(*) FROM task_validations")[0][0] == 1


def test_the_mini_suite_is_valid_and_the_cli_writes_the_table(tmp_path):
    from failatlas.cli import app

    db = str(tmp_path / "v.duckdb")
    cli = CliRunner()
    assert cli.invoke(app, ["--db", db, "tasks", "import-mini"]).exit_code == 0
    out = tmp_path / "out"
    res = cli.invoke(app, ["--db", db, "tasks", "validate", "--benchmark", "failatlas-mini", "--sandbox", "local",
                           "--runs-dir", str(tmp_path / "runs"), "--out", str(out),
                           "--mutants", "0", "--method-mutants", "0"])  # the mutation scores have their own tests
    assert res.exit_code == 0, res.output
    report = json.loads((out / "task_validation.json").read_text())
    statuses = {t["task_id"]: t["status"] for t in report["tasks"]}
    # the design-only task has no check that runs code: only judges compare gold's text with its ground truth
    assert statuses.pop("mini-tree-depth") == "judges-only"
    if detect_gpus():  # pragma: no cover - a GPU host runs the GPU task too
        assert set(statuses.values()) == {"valid"}
        return
    assert statuses.pop("mini-mlp-bf16") == "needs-gpu"  # this host has no GPU
    assert set(statuses.values()) == {"valid"} and len(statuses) == 4
    assert report["counts"] == {"failatlas-mini": {"valid": 4, "judges-only": 1, "needs-gpu": 1}}
    assert "| failatlas-mini | 4 | 1 | 1 | 6 |" in (out / "task_validation.md").read_text()
    assert (out / "task_validation.csv").read_text().count("\n") == 7


def test_an_import_then_validate_of_real_tasks_without_their_repositories_says_so(store, tmp_path, shared_data):
    import_tasks(store, TaskImportParams(paths=[shared_data / "rexbench" / "instructions" / "cogs"]))
    result = run(store, ValidateParams(benchmark="rexbench", sandbox="local", runs_dir=tmp_path / "runs"))
    assert [(v.task_id, v.status) for v in result.verdicts] == [("rexbench-cogs", "repo-unavailable")]
    assert store.query("SELECT count(*) FROM runs")[0][0] == 0  # decided without a run


def test_a_stored_infra_error_run_is_redone_not_reported_again(store, tmp_path, crafted):
    """`tasks validate` retries the harness's failures: a gold run stored as infra_error (a Docker stream hiccup)
    is run again, and the task gets the status its runs earn; --no-retry-infra keeps the stored failure."""
    params = ValidateParams(task_ids=["toy-null-passes"], sandbox="local", runs_dir=tmp_path / "runs")
    run(store, params)
    with store.write() as conn:  # as the runner stores an infra_error run: no scores
        conn.execute("UPDATE runs SET status = 'infra_error', infra_error = 'ValueError: 0 is not a valid stream'"
                     " WHERE agent = 'gold'")
        for table in ("validations", "judgements", "monitor_findings"):
            conn.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT id FROM runs WHERE agent = 'gold')")
    kept = run(store, params.model_copy(update={"retry_infra": False}))
    assert [(v.status, v.reason.endswith("ValueError: 0 is not a valid stream")) for v in kept.verdicts] == [
        ("infra-error", True)]
    redone = run(store, params)
    assert [v.status for v in redone.verdicts] == ["null-passes"]
    assert store.query("SELECT status, count(*) FROM runs WHERE agent = 'gold' GROUP BY ALL") == [("completed", 1)]
    assert store.query("SELECT count(*) FROM validations v JOIN runs r ON r.id = v.run_id WHERE r.agent = 'gold'"
                       ) == [(1,)]  # and scored again

"""Issue 52, R5: the masked repository's own `.git` is the harness's, so it never fills the copy-out cap and
makes a run an `agent_error`; what an agent leaves over the cap still does, and `bench show` says why."""

from __future__ import annotations

import os
import shutil

from typer.testing import CliRunner

from failatlas.bench_core import runs
from failatlas.bench_core.suites import load_task, suite_dir
from failatlas.bench_core.tasks import save_tasks
from failatlas.cli import app
from failatlas.store import open_store


def _store_with_big_repo(tmp_path, size: int):
    folder = tmp_path / "ridge"
    shutil.copytree(suite_dir("failatlas-mini") / "ridge-cv", folder)
    (folder / "repo" / "blob.bin").write_bytes(os.urandom(size))  # incompressible: .git holds as much again
    task = load_task(folder / "task.yaml")
    store = open_store(tmp_path / "s.duckdb")
    save_tasks(store, [task], source=str(folder))
    return store, task


def _run(store, task, tmp_path):
    runs.run(store, runs.BenchParams(agent="gold", task_ids=[task.id], sandbox="local", runs_dir=tmp_path / "runs",
                                     max_copy_mib=1))
    [row] = store.query_dicts("SELECT id, status, outputs FROM runs")
    return row


def test_the_harness_git_does_not_count_against_the_cap(tmp_path):
    store, task = _store_with_big_repo(tmp_path, 700 * 1024)  # tree 0.7 MiB + .git 0.7 MiB > the 1 MiB cap
    row = _run(store, task, tmp_path)
    assert row["status"] == "completed", row["outputs"][:500]
    assert '"errors": []' in row["outputs"].replace(" ", " ")


def test_a_tree_over_the_cap_is_still_the_agents_and_bench_show_says_why(tmp_path):
    store, task = _store_with_big_repo(tmp_path, 1536 * 1024)
    row = _run(store, task, tmp_path)
    assert row["status"] == "agent_error"
    shown = CliRunner().invoke(app, ["--db", str(tmp_path / "s.duckdb"), "bench", "show", row["id"]],
                               env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "error: the working copy was not copied out whole: the total cap of 1048576 bytes" in shown.output

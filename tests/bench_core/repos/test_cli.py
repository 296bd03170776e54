"""`failatlas repos add/list/fetch` through the root CLI, on a real store file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from failatlas.bench_core.tasks import TaskSpec, list_tasks, save_tasks
from failatlas.cli import app
from failatlas.store import open_store

from .test_tarballs import README_COMMITS


def _cli(db: Path):
    runner = CliRunner(env={"FAILATLAS_NO_PROGRESS": "1"})
    return lambda *args: runner.invoke(app, ["--db", str(db), *args])


def test_add_list_and_fetch_by_hand(tmp_path, shared_data, repos_data, upstream):
    run = _cli(tmp_path / "eb.duckdb")
    assert run("tasks", "import", str(shared_data / "expbench" / "iclr2024")).exit_code == 0
    added = run("repos", "add", str(repos_data / "apple__ml-calibration.tar.gz"))
    assert added.exit_code == 0, added.output
    assert "added https://github.com/apple/ml-calibration at 18ff21a7e4e409fc4885690129f50211b32ea144" in added.stdout
    assert "from the tarball's name" in added.stdout
    assert (tmp_path / "repos" / "github.com_apple_ml-calibration-18ff21a7e4e4").is_dir()
    head = upstream.commit({"x.py": "x\n"})
    bound = run("repos", "add", str(upstream.bare), "--cache-dir", str(tmp_path / "other"))
    assert bound.exit_code == 0 and head in bound.stdout
    listed = json.loads(run("repos", "list", "--json").stdout)
    assert {r["commit"] for r in listed} == {README_COMMITS["apple__ml-calibration.tar.gz"], head}
    table = run("repos", "list").stdout
    assert "2 cached repositories" in table and "ml-calibration" in table
    calibration = list_tasks(open_store(tmp_path / "eb.duckdb"), paper="18439")[0]["id"]
    save_tasks(open_store(tmp_path / "eb.duckdb"), [TaskSpec(
        id="rexbench-unreachable", benchmark="rexbench", kind="extension", question="q",
        repository={"url": "https://git.invalid/owner/name"})], source="t")  # .invalid never resolves (RFC 2606)
    fetched = run("repos", "fetch", "--task", calibration, "--task", "rexbench-unreachable", "--timeout", "60")
    assert fetched.exit_code == 1, fetched.output
    lines = fetched.stdout.splitlines()
    assert lines[0].startswith("cached  https://github.com/apple/ml-calibration at 18ff21a7e4e4")
    assert lines[1].startswith("failed  https://git.invalid/owner/name (1 task(s)): fatal: ")
    assert "2 repositories: 0 fetched, 1 already cached, 1 failed" in fetched.stdout


def test_errors_are_one_line_with_their_exit_code(tmp_path, repos_data):
    env = {**os.environ, "FAILATLAS_NO_PROGRESS": "1"}
    done = subprocess.run([sys.executable, "-m", "failatlas", "--db", str(tmp_path / "s.duckdb"), "repos", "add",
                           str(repos_data / "Hank0626__PDF.tar.gz")], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert "no URL is known for this repository" in done.stderr and "Traceback" not in done.stderr

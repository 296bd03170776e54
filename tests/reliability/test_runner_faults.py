"""Faults under the runner, through the CLI as a user runs it: SIGKILL midway and resume, a Docker daemon that
refuses calls. Each ends recorded and resumable: no lost and no duplicated runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failatlas.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("mini-ridge-cv", "mini-logreg-scaling", "mini-kmeans-init")


def _cli(db: Path, *args: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = [sys.executable, "-m", "failatlas", "--db", str(db), *args]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    if kwargs.pop("background", False):
        return subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=540)


def _stored(db: Path) -> int:
    try:
        return Store(db, lock_timeout=30).query("SELECT count(*) FROM runs")[0][0]
    except Exception:  # noqa: BLE001 - the runner may not have created the table yet
        return 0


def test_sigkill_midway_then_resume(sandbox_image: str, tmp_path: Path, table):
    from failatlas.bench_core.sandbox import list_sandboxes

    db = tmp_path / "kill.duckdb"
    assert _cli(db, "tasks", "import-mini").returncode == 0
    run_args = ["bench", "run", "--agent", "gold", "--workers", "1", *[a for t in TASKS for a in ("--task", t)]]
    runner = _cli(db, *run_args, background=True)
    deadline = time.monotonic() + 300
    while _stored(db) < 1 and time.monotonic() < deadline and runner.poll() is None:
        time.sleep(0.5)
    time.sleep(2.0)  # let the next run get going inside its sandbox
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(timeout=30)
    killed_pid = str(runner.pid)
    before = _stored(db)
    assert 1 <= before < len(TASKS), "the kill must land midway"
    again = _cli(db, *run_args)
    assert again.returncode == 0, again.stderr
    rows = Store(db).query("SELECT task_id, agent, attempt, count(*) FROM runs GROUP BY ALL ORDER BY 1")
    assert rows == [(t, "gold", 1, 1) for t in sorted(TASKS)]
    assert {s for (s,) in Store(db).query("SELECT status FROM runs")} == {"completed"}
    assert not [c for c in list_sandboxes() if c["owner_pid"] == killed_pid]
    table.record("sigkill-resume", f"killed with {before} of {len(TASKS)} stored; after re-run each of "
                 f"{len(rows)} runs stored once, no container of the killed runner", before=before, after=len(rows))


def test_docker_daemon_refusing_is_an_infra_error_then_retried(sandbox_image: str, tmp_path: Path, table):
    db = tmp_path / "daemon.duckdb"
    assert _cli(db, "tasks", "import-mini").returncode == 0
    # docker named: with no kind named, a host whose Docker does not answer gets bwrap sandboxes instead
    run_args = ["bench", "run", "--agent", "null", "--task", "mini-ridge-cv", "--sandbox", "docker"]
    dead = _cli(db, *run_args, env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    assert dead.returncode == 0, dead.stderr
    store = Store(db)
    [(status, error)] = store.query("SELECT status, infra_error FROM runs")
    assert status == "infra_error" and "Docker daemon is not reachable" in error
    before = store.query("SELECT count(*) FROM runs")[0][0]
    skipped = _cli(db, *run_args)
    assert "1 already stored" in skipped.stdout and store.query("SELECT status FROM runs") == [("infra_error",)]
    retried = _cli(db, *run_args, "--retry-infra")
    assert retried.returncode == 0, retried.stderr
    assert store.query("SELECT status, infra_error FROM runs") == [("completed", None)]
    table.record("docker-refuses", "infra_error ('Docker daemon is not reachable'); skipped on a plain re-run; "
                 "completed with --retry-infra", before=before, after=store.query("SELECT count(*) FROM runs")[0][0])

"""Ctrl-C (SIGINT to the command's process group, as a terminal sends it) stops a long `bench run` with parallel
workers without waiting for their runs, says how to resume, records the stage as interrupted, leaves no half run in
the store, and the same command then does the work once; three times in a row. How fast it stops (issue 32,
item 8: within 2 s) is measured by benchmarks/cli_interrupt.py, local and Docker, never asserted here: a timed test
fails with the machine's load; STOP_S only tells "stopped at once" from "waited for the runs" (117 s each)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import RepoRef, TaskSpec
from failatlas.store import open_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

SLEEP = "117.25"  # an unusual length, to find this test's commands among the machine's processes


def _sleeping() -> list[int]:
    """Pids of this test's agent commands still running."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == f"sleep\0{SLEEP}\0".encode():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _tasks(tmp_path: Path, n: int) -> list[TaskSpec]:
    out = []
    for i in range(n):
        folder = tmp_path / f"toy-{i}"
        (folder / "repo").mkdir(parents=True)
        (folder / "repo" / "a.py").write_text("x = 1\n")
        (folder / "task.json").write_text("{}")
        out.append(TaskSpec(id=f"toy-slow-{i}", benchmark="toy", kind="full_code", question="Wait.",
                            repository=RepoRef(local_path="repo"), source=str(folder / "task.json")))
    return out


REPEATS = 3
STOP_S = 20.0  # far below a run's 117 s: it did not wait for them (the 2 s target is the benchmark's)


def _interrupted(root: Path) -> tuple[float, list[str], Path, dict[str, str]]:
    """A `bench run` with two workers on four slow tasks, SIGINT to its process group once both agents run:
    (seconds from the signal until the command exited, the command, the store, its environment)."""
    db = root / "s.duckdb"
    store = open_store(db)
    save_tasks(store, _tasks(root, 4))
    del store
    flag = root / "go"
    cmd = [sys.executable, "-m", "failatlas", "--db", str(db), "bench", "run", "--agent", "command", "--param",
           f"command=test -e {flag} || sleep {SLEEP}", "--benchmark", "toy", "--workers", "2", "--sandbox", "local",
           "--runs-dir", str(root / "runs")]
    env = {**os.environ, "FAILATLAS_NO_PROGRESS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
    deadline = time.monotonic() + 120
    while len(_sleeping()) < 2 and time.monotonic() < deadline:  # both workers' agents under way
        time.sleep(0.2)
    assert len(_sleeping()) >= 2, "the agents never started"
    signalled = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)  # far less than the 117 s each run would take
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("Ctrl-C did not stop `bench run`") from None
    seconds = time.monotonic() - signalled
    assert proc.returncode == 130 and "interrupted; re-run the same command to resume" in err.decode()
    flag.touch()
    return seconds, cmd, db, env


def test_ctrl_c_stops_parallel_runs_at_once_and_the_same_command_resumes(tmp_path: Path):
    stops = []
    for n in range(REPEATS):
        seconds, cmd, db, env = _interrupted(tmp_path / str(n))
        stops.append(seconds)
        time.sleep(1)
        assert _sleeping() == []  # no agent command outlives the interrupted runs
        store = open_store(db)
        assert store.query("SELECT stage, status FROM stage_runs WHERE stage = 'bench.run'") == [
            ("bench.run", "interrupted")]
        assert store.query("SELECT count(*) FROM runs") == [(0,)]  # no run finished: none is stored, none half
        del store
    assert all(s <= STOP_S for s in stops), f"SIGINT to exit, s: {[round(s, 2) for s in stops]} (load " \
        f"{os.getloadavg()[0]:.1f})"
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    store = open_store(db)
    assert store.query("SELECT count(*), count(DISTINCT task_id) FROM runs WHERE status = 'completed'") == [(4, 4)]


QUERY = """
import sys
from failatlas.core.store import Store
store = Store(sys.argv[1])
with store.write() as conn:
    conn.execute("CREATE TABLE t (x INTEGER)")
print("ready", flush=True)
try:
    store.query("SELECT count(*) FROM range(100000000000) a")
except Exception as exc:  # what a batch's per-run handler does with a run's failure
    print("swallowed", type(exc).__name__, exc, flush=True)
"""


def test_ctrl_c_during_a_store_query_is_an_interrupt_no_handler_swallows(tmp_path: Path):
    """DuckDB reports Ctrl-C during a query as an Exception (`RuntimeError: Query interrupted`); the store turns
    it back into KeyboardInterrupt, so `except Exception` around one run's scoring cannot eat it."""
    proc = subprocess.Popen([sys.executable, "-c", QUERY, str(tmp_path / "q.duckdb")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the query went on after Ctrl-C") from None
    assert "swallowed" not in out and "KeyboardInterrupt" in err

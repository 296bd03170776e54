"""Ctrl-C (SIGINT to the process group, as a terminal sends it) stops `bench score --workers 2` while both of its
threads wait on clean re-runs: the re-runs' commands are killed, nothing half-judged is written, the stage is
recorded as interrupted, and the same command then scores every run once. (How fast it stops is measured by the
benchmarks, never here.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import ExpectedMetric, RepoRef, RunSpec, TaskSpec
from failatlas.store import open_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

SLEEP = "118.5"  # an unusual length, to find this test's re-runs among the machine's processes


def _sleeping() -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and f"sleep\0{SLEEP}\0".encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_ctrl_c_stops_parallel_scoring_and_the_same_command_resumes(tmp_path: Path):
    flag = tmp_path / "go"
    db = tmp_path / "s.duckdb"
    store = open_store(db)
    tasks = []
    for i in range(4):
        folder = tmp_path / f"toy-{i}"
        (folder / "repo").mkdir(parents=True)
        (folder / "repo" / "a.py").write_text("x = 1\n")
        (folder / "task.json").write_text("{}")
        tasks.append(TaskSpec(id=f"toy-score-{i}", benchmark="toy", kind="full_code", question="Wait.",
                              repository=RepoRef(local_path="repo"), source=str(folder / "task.json"),
                              run=RunSpec(command=f"(test -e {flag} || sleep {SLEEP}); echo '{{\"x\": 1}}' > r.json",
                                          results_file="r.json", timeout_s=600),
                              expected_results=[ExpectedMetric(name="x", value=1.0)]))
    save_tasks(store, tasks)
    del store
    env = {**os.environ, "FAILATLAS_NO_PROGRESS": "1"}
    base = [sys.executable, "-m", "failatlas", "--db", str(db)]
    subprocess.run([*base, "bench", "run", "--agent", "null", "--benchmark", "toy", "--sandbox", "local",
                    "--runs-dir", str(tmp_path / "runs")], check=True, capture_output=True, env=env, timeout=600)
    cmd = [*base, "bench", "score", "--workers", "2", "--sandbox", "local", "--runs-dir", str(tmp_path / "runs")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
    deadline = time.monotonic() + 180
    while len(_sleeping()) < 2 and time.monotonic() < deadline:  # both threads' re-runs under way
        time.sleep(0.3)
    assert len(_sleeping()) == 2, "the two workers' re-runs never ran at once"
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)  # far less than the re-runs would take
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("Ctrl-C did not stop `bench score --workers 2`") from None
    assert proc.returncode == 130 and "interrupted; re-run the same command to resume" in err.decode()
    time.sleep(1)
    assert _sleeping() == []  # no re-run outlives the interrupted batch
    with open_store(db).read() as conn:
        assert conn.execute("SELECT status FROM stage_runs WHERE stage = 'bench.score'").fetchall() == [
            ("interrupted",)]
        # nothing half-judged
        assert conn.execute("SELECT (SELECT count(*) FROM validations) + (SELECT count(*) FROM judgements)"
                            ).fetchone() == (0,)
    flag.touch()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    with open_store(db).read() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT run_id) FROM validations").fetchone() == (4, 4)

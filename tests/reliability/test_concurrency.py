"""Several writers and readers at once against one store: the runner with 2 workers, a second writer process
importing insights, a reader process polling, the app rendering, and threads of this process reading and writing.
No lock errors, no lost writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from failatlas.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TASKS = ("mini-ridge-cv", "mini-logreg-scaling", "mini-kmeans-init")
COPIES = 6

READER = """
import sys, time
from failatlas.store import Store
store, seen = Store(sys.argv[1], lock_timeout=120), []
while True:
    seen.append(store.query("SELECT count(*) FROM runs")[0][0])
    if seen[-1] >= int(sys.argv[2]):
        break
    time.sleep(0.05)
assert seen == sorted(seen), seen
print(len(seen))
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_workers_writers_readers_and_the_app_at_once(sandbox_image, tmp_path, monkeypatch, table):
    from streamlit.testing.v1 import AppTest

    # AppTest leaves sys.modules["__main__"] pointing at app.py; spawned worker pools of later tests would run it
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])
    db = tmp_path / "busy.duckdb"
    cli = [sys.executable, "-m", "failatlas", "--db", str(db)]
    subprocess.run([*cli, "tasks", "import-mini"], cwd=ROOT, env=_env(), check=True, capture_output=True)
    copies = []
    for i in range(COPIES):
        copies.append(tmp_path / f"insights-{i}.jsonl")
        shutil.copy(FIXTURES / "ingest" / "good.jsonl", copies[-1])
    before = Store(db).query("SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM insight_sources)")[0][0]

    runner = subprocess.Popen([*cli, "bench", "run", "--agent", "gold", "--workers", "2",
                               *[a for t in TASKS for a in ("--task", t)]],
                              cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(db), str(len(TASKS))], cwd=ROOT, env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writers = [subprocess.Popen([*cli, "ingest", "file", str(path)], cwd=ROOT, env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for path in copies[:3]]

    errors: list[str] = []
    in_process = Store(db, lock_timeout=120)

    def thread_reads() -> None:
        while runner.poll() is None:
            try:
                in_process.query("SELECT count(*) FROM tasks")
            except Exception as exc:  # noqa: BLE001 - collected and asserted on
                errors.append(f"reader thread: {exc!r}")
            time.sleep(0.1)

    def thread_writes() -> None:
        from failatlas.ingest import FileIngestParams, run_file

        for path in copies[3:]:
            try:
                run_file(in_process, FileIngestParams(paths=[path]))
            except Exception as exc:  # noqa: BLE001 - collected and asserted on
                errors.append(f"writer thread: {exc!r}")

    threads = [threading.Thread(target=thread_reads), threading.Thread(target=thread_writes)]
    for t in threads:
        t.start()
    monkeypatch.setenv("FAILATLAS_DB", str(db))
    renders = 0
    while runner.poll() is None and renders < 5:
        app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
        assert not app.exception, app.exception
        renders += 1
        time.sleep(1.0)
    out, err = runner.communicate(timeout=540)
    for t in threads:
        t.join(timeout=120)
    assert runner.returncode == 0, err
    reads, reader_err = reader.communicate(timeout=120)
    assert reader.returncode == 0, reader_err
    for w in writers:
        w_out, w_err = w.communicate(timeout=120)
        assert w.returncode == 0, w_err
    assert not errors, errors
    store = Store(db)
    assert store.query("SELECT task_id, status FROM runs ORDER BY 1") == [(t, "completed") for t in sorted(TASKS)]
    assert store.query("SELECT count(*) FROM insight_sources")[0][0] == 4 * COPIES
    after = store.query("SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM insight_sources)")[0][0]
    table.record("concurrency", f"3 runs (2 workers) + {COPIES} insight imports (3 processes, 1 thread) all "
                 f"stored; {reads.strip()} polls by a reader process, {renders} app renders, no lock error",
                 before=before, after=after)

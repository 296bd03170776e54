"""A benchmark-like writer for the concurrency tests: commits one run at a time in its own process and records
how long each commit waited for the store (`python -m tests.app.writer DB N OUT`), or holds a read-only
connection open for a while (`python -m tests.app.writer DB hold SECONDS`)."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time

import duckdb

from failatlas.store import Store


def write_runs(db: str, n: int, out: str) -> None:
    store = Store(db, lock_timeout=60)
    waits = []
    now = dt.datetime(2026, 1, 2)
    for k in range(n):
        started = time.monotonic()
        with store.write() as conn:
            waits.append(time.monotonic() - started)
            conn.execute(
                "INSERT INTO runs (id, task_id, agent, agent_params, model, attempt, benchmark, status, sandbox,"
                " started_at, finished_at, duration_s, outputs) VALUES (?, 't1', 'writer-agent', '{}', '', 1,"
                " 'mini-suite', 'completed', 'local', ?, ?, 1, '{}')", [f"w{k}", now, now])
        time.sleep(0.02)
    with open(out, "w") as fh:
        json.dump(waits, fh)


def hold_read_only(db: str, seconds: float) -> None:
    conn = duckdb.connect(db, read_only=True)
    print("holding", flush=True)
    time.sleep(seconds)
    conn.close()


if __name__ == "__main__":
    if sys.argv[2] == "hold":
        hold_read_only(sys.argv[1], float(sys.argv[3]))
    else:
        write_runs(sys.argv[1], int(sys.argv[2]), sys.argv[3])

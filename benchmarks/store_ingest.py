"""Store ingest: trace events (`sandbox_commands` rows) per second through the runner's write path and in bulk.

    python benchmarks/store_ingest.py [--rows 200000] [--per-run 1000] [--repeats 3] [--json OUT]

Each repeat uses a fresh DuckDB file:
- runner: `write_run(store, record)` (`bench_core/runs/writes.py`) for `rows / per_run` RunRecords of `per_run`
  commands each (one transaction per run, as the runner stores runs);
- arrow bulk: one `INSERT INTO sandbox_commands (<its columns>) SELECT * FROM <Arrow table>` of all rows;
- parquet bulk: the same rows written to Parquet first (not timed), then `INSERT ... FROM read_parquet(...)`.
Rows carry realistic tails (a few hundred characters of output). Medians and min-max of rows/s.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first

COMMANDS = ["python train.py", "pip install -r requirements.txt", "ls -la", "cat results.json",
            "python -m pytest -q", "bash run.sh", "git diff", "nvidia-smi", "python eval.py --split test"]


def make_records(rows: int, per_run: int, seed: int = 0) -> list:
    from failatlas.bench_core.runs.model import CommandRow, RunOutputs, RunRecord, RunRequest

    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    records = []
    for r in range(rows // per_run):
        request = RunRequest(task_id=f"task-{r % 50}", agent="bench", model="m", attempt=r + 1)
        commands = [
            CommandRow(seq=i, purpose="agent", command=rng.choice(COMMANDS),
                       started_at=t0 + timedelta(seconds=i), duration_s=rng.random() * 10,
                       exit_code=rng.choice([0, 0, 0, 1]), timed_out=False, killed_reason=None,
                       output_truncated=False, stdout_tail=f"epoch {i} loss {rng.random():.4f} " * 8,
                       stderr_tail="Traceback (most recent call last): ... ValueError" if i % 7 == 0 else "")
            for i in range(per_run)
        ]
        records.append(RunRecord(request=request, benchmark="bench", status="completed", sandbox="local",
                                 started_at=t0, finished_at=t0 + timedelta(seconds=60), outputs=RunOutputs(),
                                 commands=commands))
    return records


def arrow_table(records: list):  # noqa: ANN201
    import pyarrow as pa

    cols: dict[str, list] = {k: [] for k in ("run_id", "seq", "purpose", "command", "started_at", "duration_s",
                                             "exit_code", "timed_out", "killed_reason", "output_truncated",
                                             "stdout_tail", "stderr_tail")}
    for rec in records:
        rid = rec.request.run_id
        for c in rec.commands:
            cols["run_id"].append(rid)
            for k in list(cols)[1:]:
                cols[k].append(getattr(c, k))
    return pa.table(cols)


def bench_runner(path: Path, records: list) -> float:
    from failatlas.bench_core.runs.writes import write_run
    from failatlas.store import open_store

    store = open_store(path)
    t = time.perf_counter()
    for rec in records:
        write_run(store, rec)
    return time.perf_counter() - t


def bench_arrow(path: Path, table) -> float:  # noqa: ANN001
    from failatlas.store import open_store

    store = open_store(path)
    t = time.perf_counter()
    with store.write() as conn:
        conn.register("new_rows", table)
        conn.execute(f"INSERT INTO sandbox_commands ({', '.join(table.column_names)}) SELECT * FROM new_rows")
    return time.perf_counter() - t


def bench_parquet(path: Path, table, tmp: Path) -> float:  # noqa: ANN001
    import pyarrow.parquet as pq

    from failatlas.store import open_store

    pq.write_table(table, tmp / "rows.parquet")
    store = open_store(path)
    t = time.perf_counter()
    with store.write() as conn:
        conn.execute(f"INSERT INTO sandbox_commands ({', '.join(table.column_names)})"
                     f" SELECT * FROM read_parquet('{tmp / 'rows.parquet'}')")
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--per-run", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--paths", default="runner,arrow,parquet")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    records = make_records(args.rows, args.per_run)
    n = len(records) * args.per_run
    table = arrow_table(records)
    paths = args.paths.split(",")
    rates: dict[str, list[float]] = {p: [] for p in paths}
    for _ in range(args.repeats):
        for p in paths:
            with tempfile.TemporaryDirectory() as tmp:
                db = Path(tmp) / "store.duckdb"
                if p == "runner":
                    secs = bench_runner(db, records)
                elif p == "arrow":
                    secs = bench_arrow(db, table)
                else:
                    secs = bench_parquet(db, table, Path(tmp))
            rates[p].append(n / secs)
    print(f"\n{n} sandbox_commands rows ({len(records)} runs of {args.per_run}), {args.repeats} repeats, "
          "fresh store each; rows/s median (min-max)\n")
    print("| path | rows/s |")
    print("|---|---|")
    for p, xs in rates.items():
        print(f"| {p} | {statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f}) |")
    result = {"rows": n, "per_run": args.per_run, "rates": rates}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()

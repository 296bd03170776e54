"""Runner scaling: runs per minute of a sleep-bound agent with 1, 2 and 4 workers, local and Docker sandboxes.

    python benchmarks/scaling.py [--workers 1,2,4] [--sandboxes local,docker] [--runs 8] [--sleep 5] [--json OUT]

The `command` agent runs `sleep S` on the CPU-only tasks of the mini-suite (cycled with extra attempts up to
`--runs` runs), through `plan` + `run_batch` (the building blocks of `runs.run`, behind `failatlas bench
run`) into a fresh store per configuration. Runs per minute = runs / wall x 60; the ideal for w workers is
min(w, runs) x 60 / (S + overhead).
The agent sleeps, so what the workers contend for is the harness's own work (workspace copies, container start,
output collection, diffs, store writes) on the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first


def one(sandbox: str, workers: int, runs: int, sleep: float) -> dict[str, Any]:
    from failatlas.bench_core.runs.execute import RunConfig
    from failatlas.bench_core.runs.runner import plan, run_batch
    from failatlas.bench_core.suites.loader import load_suite
    from failatlas.store import open_store

    tasks = [t for t in load_suite() if t.resources.gpus == 0]
    attempts = -(-runs // len(tasks))
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "store.duckdb")
        work = plan(store, tasks, "command", agent_params={"command": f"sleep {sleep}"}, attempts=attempts).todo
        work = work[:runs]
        config = RunConfig(runs_dir=Path(tmp) / "runs", sandbox=sandbox, keep_workspace=False)
        t = time.perf_counter()
        report = run_batch(store, work, config, workers=workers)
        wall = time.perf_counter() - t
    return {"sandbox": sandbox, "workers": workers, "runs": len(work), "wall_s": wall,
            "runs_per_min": len(work) / wall * 60, "by_status": report.by_status}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--sandboxes", default="local,docker")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--sleep", type=float, default=5.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rows = []
    for sandbox in args.sandboxes.split(","):
        for w in (int(x) for x in args.workers.split(",")):
            rows.append(one(sandbox, w, args.runs, args.sleep))
            print(f"{sandbox} x{w}: {rows[-1]['wall_s']:.1f} s, {rows[-1]['by_status']}", file=sys.stderr)
    print(f"\n`sleep {args.sleep:g}` agent, {args.runs} runs per configuration, {os.cpu_count()} CPUs\n")
    print("| sandbox | workers | wall | runs/min | speed-up vs 1 worker | ideal (sleep-bound) |")
    print("|---|---|---|---|---|---|")
    base: dict[str, float] = {}
    for r in rows:
        base.setdefault(r["sandbox"], r["runs_per_min"])
        per_run = r["wall_s"] / r["runs"] if r["workers"] == 1 else None
        if per_run:
            base[r["sandbox"] + ":per_run"] = per_run
        one_run = base.get(r["sandbox"] + ":per_run")
        ideal = f"{min(r['workers'], r['runs']) * 60 / one_run:.1f}" if one_run else "n/a"
        print(f"| {r['sandbox']} | {r['workers']} | {r['wall_s']:.1f} s | {r['runs_per_min']:.1f} | "
              f"{r['runs_per_min'] / base[r['sandbox']]:.2f}x | {ideal} |")
    result = {"rows": rows, "sleep": args.sleep}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()

"""Run the mini-suite's GPU task (mini-mlp-bf16) with the local sandbox on a GPU host, score it, print the result.

The same as, on a host with FailAtlas installed:
    failatlas tasks import-mini
    failatlas bench run --agent gold --task mini-mlp-bf16 --sandbox local
    failatlas bench score --sandbox local
Usage: python benchmarks/gpu_mini_task.py [--db PATH]   (writes gpu_mini_task.json to $OUT when set)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.sandbox import detect_gpus
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=str(Path(tempfile.mkdtemp()) / "gpu.duckdb"))
    args = parser.parse_args()
    store = open_store(args.db)
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    task_ids = ["mini-mlp-bf16"]
    print("GPUs on this host:", detect_gpus())
    runs_dir = Path(args.db).parent / "runs"
    for agent in ("gold", "null"):
        report = runs.run(store, runs.BenchParams(agent=agent, task_ids=task_ids, runs_dir=runs_dir, sandbox="local"))
        print(agent, report.by_status)
    scoring.run(store, scoring.ScoreParams(runs_dir=runs_dir, sandbox="local", llm=False))
    rows = store.query_dicts(
        "SELECT r.agent, r.status, v.outcome, v.duration_s, v.metrics, v.stdout_tail, v.stderr_tail"
        " FROM runs r LEFT JOIN validations v ON v.run_id = r.id ORDER BY r.agent")
    commands = store.query_dicts(
        "SELECT r.agent, c.command, c.exit_code, c.duration_s, c.stdout_tail FROM sandbox_commands c"
        " JOIN runs r ON r.id = c.run_id WHERE c.command LIKE '%run.sh%'")
    judgements = store.query_dicts(
        "SELECT r.agent, j.phase, j.judge, j.status, j.passed FROM judgements j JOIN runs r ON r.id = j.run_id"
        " WHERE j.status = 'ok' ORDER BY 1, 2")
    for row in rows:
        print(f"{row['agent']}: run {row['status']}, validator {row['outcome']} in {row['duration_s']} s")
        print("  metrics:", row["metrics"])
    for c in commands:
        print(f"{c['agent']} ran `{c['command']}` -> exit {c['exit_code']} in {c['duration_s']:.1f} s")
        print("  " + (c["stdout_tail"] or "")[-600:].replace("\n", "\n  "))
    for j in judgements:
        print(f"{j['agent']}: {j['phase']} ({j['judge']}) passed={j['passed']}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_mini_task.json").write_text(
            json.dumps({"runs": rows, "commands": commands, "judgements": judgements}, default=str, indent=1))


if __name__ == "__main__":
    main()

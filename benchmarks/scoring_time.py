"""Scoring time per run, two checkouts side by side on the same runs (issue 50: at most 1.3x today's).

Takes a folder holding a store of finished runs (`runs.duckdb` and its `runs/`, as `verdicts_unchanged.py make`
writes them) and two checkouts, each with its own interpreter (`<checkout>/.venv/bin/python`, else `python3` run in
the checkout). Each round scores a fresh copy of the store once with each checkout, in alternating order, in Docker,
no LLM, `--workers` threads; the first round of each also makes its derived-test recordings (shared by later
rounds, as in a real scoring batch), so it is reported apart. Prints seconds per run and the ratio:

    python benchmarks/scoring_time.py DIR --before ../wt-before --after . [--rounds 2] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys, time
from pathlib import Path
from failatlas.bench_core import scoring
from failatlas.bench_core.sandbox import DEFAULT_IMAGE
from failatlas.store import open_store
store_path, runs_dir, workers = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
store = open_store(store_path)
start = time.monotonic()
result = scoring.run(store, scoring.ScoreParams(runs_dir=runs_dir, sandbox="docker", image=DEFAULT_IMAGE, llm=False,
                                                workers=workers, rescore=True))
print(json.dumps({"seconds": time.monotonic() - start, "scored": result.scored,
                  "infra": len(result.infra_errors), "failed": len(result.failed)}))
"""


def _python(checkout: Path) -> str:
    venv = checkout / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else "python3"


def score_once(checkout: Path, folder: Path, label: str, workers: int) -> dict:
    """Score a fresh copy of `folder`'s store with `checkout`'s code; its timing line."""
    target = folder / f"time-{label}.duckdb"
    shutil.copy(folder / "runs.duckdb", target)
    done = subprocess.run([_python(checkout), "-c", CHILD, str(target), str(folder / "runs"), str(workers)],
                          cwd=checkout, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"scoring with {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    folder = args.folder.resolve()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: dict[str, list[float]] = {"before": [], "after": []}
    for n in range(args.rounds):
        order = ["before", "after"] if n % 2 == 0 else ["after", "before"]
        for side in order:
            line = score_once(sides[side], folder, f"{side}-{n}", args.workers)
            per_run = line["seconds"] / max(1, line["scored"])
            times[side].append(per_run)
            print(f"round {n} {side}: {line['scored']} runs in {line['seconds']:.0f} s = {per_run:.1f} s/run "
                  f"(infra {line['infra']}, failed {line['failed']})", flush=True)
    first = times["after"][0] / times["before"][0]
    print(f"first round (recordings made): after/before = {first:.2f}x")
    if args.rounds > 1:
        before, after = statistics.median(times["before"][1:]), statistics.median(times["after"][1:])
        print(f"later rounds: before {before:.1f} s/run, after {after:.1f} s/run, after/before = "
              f"{after / before:.2f}x")


if __name__ == "__main__":
    main()

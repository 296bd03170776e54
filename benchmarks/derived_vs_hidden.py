"""Do the derived tests agree with the hand-written hidden tests? (issue 38)

For each CPU task of the mini-suite that masks functions, a copy with its hand-written hidden tests removed
(`implementation.hidden_tests=[]`, id `<task>-nohidden`) is saved beside it. gold, null and every fault agent
(`--hostile`: the hostile agents too; `--agents`, `--tasks`: only those) run on both, in Docker; the runs of the
task are scored with `hidden-tests`, those of the copy with `derived-tests` (no recording exists before: scoring
makes it on first need). Prints one markdown row per task and agent: the two verdicts, and whether they agree on
pass/fail.

    python benchmarks/derived_vs_hidden.py [--workers 2] [--hostile] [--agents A ...] [--tasks T ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

TASKS = ("mini-ridge-cv", "mini-kmeans-init")  # mini-mlp-bf16 also masks a function but needs a GPU


def _verdict(row: dict | None) -> str:
    if row is None:
        return "none"
    if row["status"] != "ok":
        return row["status"]
    verdict = json.loads(row["verdict"] or "{}")
    word = "pass" if row["passed"] else "fail"
    if row["judge"] == "derived-tests":
        return (f"{word} {verdict.get('matched')}/{verdict.get('cases')} "
                f"({verdict.get('perturbed')} perturbed, {verdict.get('skipped_unencodable')} unencodable)")
    return f"{word} {verdict.get('passed')}/{verdict.get('total')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hostile", action="store_true", help="also the hostile agents")
    parser.add_argument("--agents", nargs="+", help="only these agents (default: gold, null, every fault agent)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), help=f"default: {' '.join(TASKS)}")
    parser.add_argument("--keep", type=Path, help="a folder for the store and runs (default: a temporary one)")
    args = parser.parse_args()

    from failatlas.bench_core import runs, scoring
    from failatlas.bench_core.agents import agent_names
    from failatlas.bench_core.sandbox import DEFAULT_IMAGE, build_base_image
    from failatlas.bench_core.suites import load_suite
    from failatlas.bench_core.tasks import save_tasks
    from failatlas.store import open_store

    build_base_image(DEFAULT_IMAGE)
    agents = ["gold", "null", *sorted(n for n in agent_names() if n.startswith("fault-"))]
    if args.hostile:
        agents += sorted(n for n in agent_names(include_hidden=True) if n.startswith("hostile-"))
    agents = args.agents or agents
    root = args.keep or Path(tempfile.mkdtemp(prefix="failatlas-derived-"))
    store = open_store(root / "store.duckdb")
    tasks = [t for t in load_suite("failatlas-mini") if t.id in args.tasks]
    copies = [t.model_copy(update={"id": f"{t.id}-nohidden", "implementation": t.implementation.model_copy(
        update={"hidden_tests": []})}) for t in tasks]
    save_tasks(store, tasks + copies, source="failatlas-mini")
    common = {"sandbox": "docker", "image": DEFAULT_IMAGE, "runs_dir": root / "runs", "workers": args.workers}
    start = time.monotonic()
    for agent in agents:
        runs.run(store, runs.BenchParams(agent=agent, task_ids=[t.id for t in tasks + copies], **common))
    ran = time.monotonic() - start
    ids = {t.id: [r[0] for r in store.query("SELECT id FROM runs WHERE task_id = ?", [t.id])] for t in tasks + copies}
    start = time.monotonic()
    scoring.run(store, scoring.ScoreParams(run_ids=[i for t in tasks for i in ids[t.id]], judges=["hidden-tests"],
                                           **common))
    hidden_s = time.monotonic() - start
    start = time.monotonic()
    scoring.run(store, scoring.ScoreParams(run_ids=[i for t in copies for i in ids[t.id]], judges=["derived-tests"],
                                           **common))
    derived_s = time.monotonic() - start
    rows = store.query_dicts(
        "SELECT r.task_id, r.agent, j.judge, j.status, j.passed, j.verdict FROM judgements j JOIN runs r"
        " ON r.id = j.run_id WHERE j.judge IN ('hidden-tests', 'derived-tests')")
    found = {(r["task_id"], r["agent"], r["judge"]): r for r in rows}
    print("| task | agent | hand-written hidden tests | derived tests (no-hidden copy) | agree |")
    print("|---|---|---|---|---|")
    agreed = total = 0
    for task in tasks:
        for agent in agents:
            hidden = found.get((task.id, agent, "hidden-tests"))
            derived = found.get((f"{task.id}-nohidden", agent, "derived-tests"))
            same = (hidden is not None and derived is not None and hidden["status"] == derived["status"] == "ok"
                    and bool(hidden["passed"]) == bool(derived["passed"]))
            agreed += same
            total += 1
            print(f"| {task.id} | {agent} | {_verdict(hidden)} | {_verdict(derived)} | {'yes' if same else 'NO'} |")
    print(f"\nagree on {agreed} of {total}; runs {ran:.0f} s, hidden-tests scoring {hidden_s:.0f} s, derived-tests "
          f"scoring {derived_s:.0f} s (recording made on first need); store: {store.path}")


if __name__ == "__main__":
    main()

"""Are the verdicts of a scoring change the same as before it? (issue 51: a reshape must not change a verdict)

Three stores of real Docker runs, made once by `make`: `proof` (the harness proof: gold, null and the fault agents
on every CPU mini task), `attacks` (null and every hostile agent on every CPU mini task, each with its copy without
hidden tests: the whole attack matrix, FAILATLAS_ATTACK_TASKS=all) and `derived` (the derived-versus-hidden table:
gold, null and the fault agents on the two tasks that mask functions and their copies without hidden tests). Then
`score` re-scores a copy of each store with whatever code the interpreter imports (run it once from a checkout of
the old commit, once from the new), `dump` prints one store's verdicts canonically and `diff` compares two labels:

    python benchmarks/verdicts_unchanged.py make DIR [--workers 2]
    python benchmarks/verdicts_unchanged.py score DIR LABEL [--workers 2] [--image TAG]  # LABEL=before, then after
    python benchmarks/verdicts_unchanged.py diff DIR before after

What is compared per run: the validation's outcome, exit code and observed metric values; per judgement its phase,
judge, status, passed and score (rounded to 1e-9); the monitor's findings as (rule, severity). Sentences (details,
error analyses, evidence strings) are not compared: a reshape may word them anew. Only public calls are used
(`scoring.run`, `runs.run`), so the script runs on both sides of the change.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

STORES = ("proof", "attacks", "derived")
DERIVED_TASKS = ("mini-ridge-cv", "mini-kmeans-init")


def _tasks(kind: str):
    from failatlas.bench_core.suites import load_suite

    tasks = [t for t in load_suite("failatlas-mini") if t.resources.gpus == 0]
    if kind == "proof":
        return tasks
    if kind == "derived":
        tasks = [t for t in tasks if t.id in DERIVED_TASKS]
    copies = [t.model_copy(deep=True, update={"id": f"{t.id}-no-hidden-tests"}) for t in tasks
              if t.implementation.hidden_tests]
    for copy in copies:
        copy.implementation.hidden_tests = []
    return tasks + copies


def _agents(kind: str) -> list[str]:
    import failatlas.bench_core.agents  # noqa: F401 - registers every agent
    from failatlas.bench_core.agents.base import agent_names

    faults = sorted(n for n in agent_names() if n.startswith("fault-"))
    if kind == "attacks":
        return ["null", *sorted(n for n in agent_names(include_hidden=True) if n.startswith("hostile-"))]
    return ["gold", "null", *faults]


def make(root: Path, workers: int) -> None:
    """Run every agent of each store on its tasks, in Docker; nothing is scored."""
    from failatlas.bench_core.agents.base import Budget
    from failatlas.bench_core.runs.execute import RunConfig
    from failatlas.bench_core.runs.runner import plan, run_batch
    from failatlas.bench_core.sandbox import DEFAULT_IMAGE, build_base_image
    from failatlas.bench_core.tasks import save_tasks
    from failatlas.store import open_store

    build_base_image(DEFAULT_IMAGE)
    for kind in STORES:
        folder = root / kind
        folder.mkdir(parents=True, exist_ok=True)
        store = open_store(folder / "runs.duckdb")
        tasks = _tasks(kind)
        save_tasks(store, tasks, source="failatlas-mini")
        start = time.monotonic()
        work = []
        for agent in _agents(kind):
            params = {"host_target": str(folder / "canary")} if agent == "hostile-write-outside" else None
            work += plan(store, tasks, agent, agent_params=params).todo
        budget = Budget(command_timeout_s=10, max_seconds=300) if kind == "attacks" else Budget()
        config = RunConfig(runs_dir=folder / "runs", image=DEFAULT_IMAGE, budget=budget,
                           **({"memory_mb": 1024, "pids_limit": 64} if kind == "attacks" else {}))
        batch = run_batch(store, work, config, workers=workers)
        print(f"{kind}: {len(work)} runs in {time.monotonic() - start:.0f} s"
              f" ({len(batch.infra_errors)} infra errors)", flush=True)


def score(root: Path, label: str, workers: int, image: str | None = None) -> None:
    """Re-score a copy of each store (`<kind>/<label>.duckdb`) with the code this interpreter imports, in `image`
    (default: the image the runs were made in, this code's DEFAULT_IMAGE where none is given): both sides of a
    comparison should re-run in the same image, so that only the code differs."""
    from failatlas.bench_core import scoring
    from failatlas.bench_core.sandbox import DEFAULT_IMAGE
    from failatlas.store import open_store

    image = image or DEFAULT_IMAGE

    for kind in STORES:
        folder = root / kind
        target = folder / f"{label}.duckdb"
        shutil.copy(folder / "runs.duckdb", target)
        store = open_store(target)
        _fit_tables(store, kind, label)
        _fit_tasks(store, kind, label)
        start = time.monotonic()
        result = scoring.run(store, scoring.ScoreParams(runs_dir=folder / "runs", sandbox="docker",
                                                        image=image, llm=False, workers=workers,
                                                        rescore=True))
        print(f"{kind} {label}: {result.scored} scored in {time.monotonic() - start:.0f} s; "
              f"infra {len(result.infra_errors)}, failed {len(result.failed)}", flush=True)
        (folder / f"{label}.json").write_text(json.dumps(dump(store), indent=1, sort_keys=True))


def _fit_tables(store, kind: str, label: str) -> None:
    """Drop the columns this code's own schema does not have (an older checkout writes some tables by position, and
    a newer store's extra columns, such as issue 51's `evidence_ids`, would refuse its rows), saying which: the
    schema is read from a fresh store this code migrates."""
    import tempfile

    from failatlas.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        fresh = open_store(Path(tmp) / "schema.duckdb")
        own = {(t, c) for t, c in fresh.query("SELECT table_name, column_name FROM information_schema.columns")}
    have = store.query("SELECT table_name, column_name FROM information_schema.columns")
    extra = sorted((t, c) for t, c in have if (t, c) not in own and any(t == o for o, _ in own))
    for table, column in extra:
        with store.write() as con:
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
    if extra:
        print(f"{kind} {label}: columns this code does not have, dropped: "
              f"{', '.join(f'{t}.{c}' for t, c in extra)}", flush=True)


def _fit_tasks(store, kind: str, label: str) -> None:
    """Drop from each stored task the top-level fields this code's TaskSpec does not know (an older checkout refuses
    a task saved by newer code with `Extra inputs are not permitted`), saying which: such a field feeds only checks
    the older code does not have."""
    from failatlas.bench_core.tasks.model import TaskSpec

    known = set(TaskSpec.model_fields)
    dropped: set[str] = set()
    for task_id, spec in store.query("SELECT id, spec FROM tasks"):
        data = json.loads(spec)
        extra = set(data) - known
        if extra:
            dropped |= extra
            for name in extra:
                del data[name]
            with store.write() as con:
                con.execute("UPDATE tasks SET spec = ? WHERE id = ?", [json.dumps(data), task_id])
    if dropped:
        print(f"{kind} {label}: fields this code does not know, dropped from the stored tasks: "
              f"{', '.join(sorted(dropped))}", flush=True)


def _round(x):
    return None if x is None else round(float(x), 9)


def dump(store) -> dict:
    """run key (agent, task) -> its verdicts as compared (module docstring)."""
    out: dict[str, dict] = {}
    rows = store.query_dicts("SELECT id, agent, task_id FROM runs")
    keys = {r["id"]: f"{r['agent']} on {r['task_id']}" for r in rows}
    for r in store.query_dicts("SELECT run_id, outcome, exit_code, metrics FROM validations"):
        metrics = json.loads(r["metrics"] or "{}")
        observed = {k: (v or {}).get("observed") if isinstance(v, dict) else v for k, v in metrics.items()}
        out.setdefault(keys[r["run_id"]], {})["E"] = {"outcome": r["outcome"], "exit": r["exit_code"],
                                                      "observed": observed}
    for r in store.query_dicts("SELECT run_id, phase, judge, status, passed, score FROM judgements"):
        out.setdefault(keys[r["run_id"]], {}).setdefault("judgements", {})[f"{r['phase']}/{r['judge']}"] = [
            r["status"], r["passed"], _round(r["score"])]
    for r in store.query_dicts("SELECT run_id, rule, severity FROM monitor_findings ORDER BY run_id, seq"):
        out.setdefault(keys[r["run_id"]], {}).setdefault("findings", []).append(f"{r['rule']}:{r['severity']}")
    for row in out.values():
        row["findings"] = sorted(row.get("findings", []))
    return out


def diff(root: Path, a: str, b: str) -> int:
    """Print every difference between the verdicts of labels `a` and `b`; the number of differing runs."""
    differing = total = 0
    kinds: dict[str, int] = {}  # each kind of change -> how many runs show it
    for kind in STORES:
        left = json.loads((root / kind / f"{a}.json").read_text())
        right = json.loads((root / kind / f"{b}.json").read_text())
        runs = sorted(set(left) | set(right))
        total += len(runs)
        bad = [r for r in runs if left.get(r) != right.get(r)]
        differing += len(bad)
        print(f"{kind}: {len(runs)} runs, {len(bad)} differ")
        for run in bad:
            print(f"  {run}:\n    {a}: {json.dumps(left.get(run), sort_keys=True)}\n"
                  f"    {b}: {json.dumps(right.get(run), sort_keys=True)}")
            for what in _changes(left.get(run) or {}, right.get(run) or {}):
                kinds[what] = kinds.get(what, 0) + 1
    print(f"in all: {differing} of {total} runs differ between {a} and {b}")
    for what, count in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {count:4d} run(s): {what}")
    return differing


def _changes(left: dict, right: dict) -> list[str]:
    """What differs between one run's two verdict records, each as `field: before -> after` (the summary's key)."""
    out = []
    for field in ("outcome", "exit", "observed"):
        x, y = (left.get("E") or {}).get(field), (right.get("E") or {}).get(field)
        if x != y:
            out.append(f"E {field}: {json.dumps(x) if field != 'observed' else 'values'} -> "
                       f"{json.dumps(y) if field != 'observed' else 'values'}")
    lj, rj = left.get("judgements", {}), right.get("judgements", {})
    for key in sorted(set(lj) | set(rj)):
        if lj.get(key) != rj.get(key):
            out.append(f"{key}: {json.dumps(lj.get(key))} -> {json.dumps(rj.get(key))}")
    lf, rf = set(left.get("findings", [])), set(right.get("findings", []))
    out += [f"finding only {'before' if f in lf else 'after'}: {f}" for f in sorted(lf ^ rf)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make")
    p.add_argument("root", type=Path)
    p.add_argument("--workers", type=int, default=2)
    p = sub.add_parser("score")
    p.add_argument("root", type=Path)
    p.add_argument("label")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--image", help="the sandbox image to re-run in (default: this code's DEFAULT_IMAGE)")
    p = sub.add_parser("diff")
    p.add_argument("root", type=Path)
    p.add_argument("a")
    p.add_argument("b")
    args = parser.parse_args()
    if args.cmd == "make":
        make(args.root.resolve(), args.workers)
    elif args.cmd == "score":
        score(args.root.resolve(), args.label, args.workers, args.image)
    else:
        sys.exit(1 if diff(args.root.resolve(), args.a, args.b) else 0)


if __name__ == "__main__":
    main()

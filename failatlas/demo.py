"""`failatlas demo`: the main job end to end on the bundled mini-suite.

Builds the sandbox image if missing, runs the reference and fault-injecting agents (and `react` when an LLM endpoint
is configured for the agent role) on every CPU task in sandboxes and on each task's impossible twin (the cheat rate,
in no score), scores everything (a twin's run only for its cheat verdict), mines the insights, builds the taxonomy,
writes the paper tables and figures, and says how to open the app. Every step is resumable: re-running does only
what is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.core.store import Store

HARNESS_AGENTS = ("gold", "null", "fault-missing-component", "fault-wrong-constant", "fault-missing-package",
                  "fault-crash", "fault-no-conclusion", "fault-fabricated-results", "fault-peek")


@dataclass
class DemoResult:
    out_dir: Path
    db: Path
    runs: int = 0  # runs of real tasks
    twin_runs: int = 0  # runs of impossible twins (the cheat rate)
    insights: int = 0
    taxonomy_id: str | None = None
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def run_demo(store: Store, *, out_dir: Path, sandbox: str = "docker", workers: int = 3, twins: bool = True,
             say: Callable[[str], None] = print, tick: Callable[[], None] | None = None) -> DemoResult:
    """Run the whole pipeline on the mini-suite into `store`, writing tables and figures under `out_dir`. With
    `twins`, every agent also runs on the tasks' impossible twins, whose runs give the cheat rate of the report
    (docs/metrics.md) and are in no score. `say` hears each step and each run as it is done. The store's file stays
    open between its many short transactions, and is given up whenever another process waits for it
    (`Store.kept`)."""
    with store.kept():
        return _run_demo(store, out_dir=out_dir, sandbox=sandbox, workers=workers, twins=twins, say=say, tick=tick)


def _run_demo(store: Store, *, out_dir: Path, sandbox: str, workers: int, twins: bool, say: Callable[[str], None],
              tick: Callable[[], None] | None) -> DemoResult:
    from failatlas.bench_core import runs, scoring
    from failatlas.bench_core.cli.lines import run_line, score_line
    from failatlas.bench_core.runs.twins import impossible_twins
    from failatlas.bench_core.sandbox import sandbox_kind
    from failatlas.bench_core.scoring.report import report_table, write_report
    from failatlas.bench_core.suites import suite_dir
    from failatlas.bench_core.tasks import TaskImportParams
    from failatlas.bench_core.tasks import run as import_tasks
    from failatlas.bench_core.tasks.twins import REAL_TASK_SQL
    from failatlas.cluster import ClusterParams
    from failatlas.cluster import run as run_cluster
    from failatlas.core.llm import resolve_config
    from failatlas.embed import EmbedParams
    from failatlas.embed import run as run_embed
    from failatlas.ingest import RunsIngestParams, run_runs
    from failatlas.taxonomy import BuildParams, export_taxonomy
    from failatlas.taxonomy import run as build_taxonomy

    start = time.monotonic()
    result = DemoResult(out_dir=out_dir, db=store.path)
    runs_dir = store.path.resolve().parent / "runs"
    steps = 8

    def step(n: int, text: str) -> None:
        say(f"[{n}/{steps} {time.monotonic() - start:5.0f} s] {text}")

    def ran(record) -> None:  # noqa: ANN001 - a RunRecord
        say("    " + run_line(record, agent=True))
        if tick:
            tick()

    sandbox_kind(sandbox).prepare(say=lambda text: step(1, text))  # docker: builds the image once
    step(2, "importing the failatlas-mini tasks")
    import_tasks(store, TaskImportParams(paths=[suite_dir("failatlas-mini")], format="failatlas"))
    tasks = runs.select_tasks(store, benchmark="failatlas-mini", include_gpu=False)
    agents = list(HARNESS_AGENTS)
    if resolve_config("agent") is not None:
        agents.append("react")
    chosen, what = list(tasks), f"on {len(tasks)} CPU tasks"
    if twins:
        twin_tasks, without = impossible_twins(store, tasks)
        chosen += twin_tasks
        what += (f" and on the impossible twins of {len(twin_tasks)} of them (in no score: the cheat rate)"
                 + "".join(f"; {note}" for note in without))
    step(3, f"running {len(agents)} agents {what} in {sandbox} sandboxes ({workers} at a time)")
    report = runs.run(store, runs.BenchParams(
        agent=agents[0], task_ids=[t.id for t in chosen], runs_dir=runs_dir, workers=workers, sandbox=sandbox),
        on_done=ran, agents=agents)  # one batch, twins included: no worker waits at the end of each agent or step
    if report.skipped:
        say(f"    {report.skipped} run(s) already stored")
    step(4, f"scoring: monitor, clean re-run by the validator, judges ({workers} runs at a time)"
         + ("; twin runs: the cheat verdict only" if twins else ""))
    scored = scoring.run(store, scoring.ScoreParams(runs_dir=runs_dir, sandbox=sandbox, workers=workers),
                         on_done=lambda done: say("    " + score_line(done)))
    say(f"    {scored.scored} run(s) scored now")
    result.files += write_report(report_table(store, by="agent"), "agent", out_dir / "scores")
    step(5, "mining insights from the judges, validator and monitor (deterministic extractor)")
    mined = run_runs(store, RunsIngestParams(extractor="deterministic"))
    say(f"    {mined.new_occurrences} new insight occurrence(s)")
    step(6, "embedding insights (all-MiniLM-L6-v2, offline; cached by content)")
    embedded = run_embed(store, EmbedParams())
    step(7, "clustering each phase and building the taxonomy")
    clusterings = run_cluster(store, ClusterParams(reassign_outliers=True,
                                                   embedding_set_id=embedded.embedding_set_id)).clusterings
    labeller = "llm" if resolve_config("labeller") is not None else "offline"
    tax = build_taxonomy(store, BuildParams(clustering_ids=[c.id for c in clusterings], labeller=labeller))
    result.taxonomy_id = tax.id
    step(8, "exporting tables and figures")
    export = export_taxonomy(store, tax.id, out_dir / "taxonomy")
    result.files += [Path(export.out_dir) / name for name in export.written]
    for name, why in export.skipped.items():
        say(f"    skipped {name}: {why}")
    result.runs, result.twin_runs = store.query(
        f"SELECT count(*) FILTER (WHERE {REAL_TASK_SQL}), count(*) FILTER (WHERE NOT ({REAL_TASK_SQL}))"
        " FROM runs r LEFT JOIN tasks t ON t.id = r.task_id")[0]
    result.insights = store.query("SELECT count(*) FROM insights")[0][0]
    result.seconds = time.monotonic() - start
    return result

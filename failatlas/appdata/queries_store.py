"""Read-only queries behind the explorer's pages: the store's status, what to run next, and the Overview's tables;
with the helpers every query module reads through.

Every function takes a `Store`, opens short-lived read-only connections (`Store.read()`, directly or through a
stage's own function), copies the result out as a polars frame or plain values, and never writes. Numbers that a
stage computes are read through that stage's function: prevalence through `taxonomy.prevalence`, the funnel
through `taxonomy.funnel`, phase and conjunctive scores through `bench_core.scoring.metrics`. Filters are bound
parameters; no user text ever becomes SQL. `failatlas.appdata.queries` re-exports every query of every module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from failatlas.bench_core.agent_order import agent_order_sql
from failatlas.core.store import Store

# Tables whose row counts decide what the app can show and what to run next.
STATUS_TABLES = (
    "tasks", "runs", "judgements", "validations", "insights", "embedding_sets", "clusterings", "taxonomies",
    "insight_failure_types",
)


def read_frame(store: Store, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
    """The rows of one read-only query as a polars frame."""
    with store.read() as conn:
        table = conn.sql(sql, params=params or None).to_arrow_table()
    return pl.from_arrow(table)  # type: ignore[return-value]


_SCORES: dict[str, tuple[tuple[int, ...], pl.DataFrame]] = {}


def scores_of(store: Store) -> pl.DataFrame:
    """`bench_core.scoring.metrics.run_scores(store)`, computed once per version of the store's files (the stamp
    the query cache keys on) in this process: the Overview's grouping, scores and funnel each read it."""
    from failatlas.appdata.cache import stamp
    from failatlas.bench_core.scoring.metrics import run_scores

    path = str(store.path.resolve())
    version = stamp(path)
    held = _SCORES.get(path)
    if held is None or held[0] != version:
        held = _SCORES[path] = (version, run_scores(store))
    return held[1]


def json_value(value: Any) -> Any:
    """A JSON column's value parsed; text that is not JSON, and every other value, as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# -- store status ----------------------------------------------------------------------------------------------
@dataclass
class StoreStatus:
    """Whether the store exists and how many rows each table the app reads holds (-1: table missing)."""

    path: str
    exists: bool
    counts: dict[str, int] = field(default_factory=dict)

    def has(self, table: str) -> bool:
        return self.counts.get(table, -1) > 0


def store_status(store: Store) -> StoreStatus:
    """Row counts of the tables the app reads; a missing file or table is reported, never raised."""
    if not store.path.exists():
        return StoreStatus(str(store.path), exists=False)
    with store.read() as conn:
        present = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        counts = {}
        for table in STATUS_TABLES:
            counts[table] = (conn.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]  # noqa: S608
                             if table in present else -1)
    return StoreStatus(str(store.path), exists=True, counts=counts)


PIPELINE = (
    ("runs", "No runs yet: run agents with `failatlas bench run`."),
    ("judgements", "Runs are not scored yet: `failatlas bench score`."),
    ("insights", "No failure insights yet: `failatlas ingest runs` (own runs) or `failatlas ingest file PATH`."),
    ("embedding_sets", "Insights are not embedded yet: `failatlas embed run`."),
    ("clusterings", "Insights are not clustered yet: `failatlas cluster run`."),
    ("taxonomies", "No taxonomy yet: `failatlas taxonomy build`."),
)
# Insights may come from files instead of runs: the mining steps do not need runs or judgements.
_NEEDS = {"runs": ("runs",), "judgements": ("runs", "judgements"),
          "insights": ("insights",), "embedding_sets": ("insights", "embedding_sets"),
          "clusterings": ("insights", "embedding_sets", "clusterings"),
          "taxonomies": ("insights", "embedding_sets", "clusterings", "taxonomies")}


def next_steps(status: StoreStatus, need: tuple[str, ...] = ()) -> list[str]:
    """What to run next when the store lacks a table that `need` lists (default: every stage's table): the missing
    steps of the pipeline up to it, in order. Empty when everything needed is there."""
    if not status.exists:
        return [f"No store at `{status.path}`. Create one: `failatlas tasks import-mini`, then "
                "`failatlas bench run`, or import insights with `failatlas ingest file PATH`."]
    if any(n < 0 for n in status.counts.values()):
        return ["The store's schema is older than this app: run `failatlas db migrate` (the app never writes)."]
    wanted = need or tuple(t for t, _ in PIPELINE)
    if all(status.has(t) for t in wanted):
        return []
    steps = {t for n in wanted if not status.has(n) for t in _NEEDS[n]}
    return [text for table, text in PIPELINE if table in steps and not status.has(table)]


# -- overview ---------------------------------------------------------------------------------------------------
def imported_overview(store: Store) -> pl.DataFrame:
    """What a store of imported insights holds: per origin and benchmark, insight occurrences, distinct insights,
    traces (tasks or runs they name) and human labels."""
    return read_frame(store, """
        SELECT coalesce(s.origin, '(unknown)') AS origin, coalesce(s.benchmark, '') AS benchmark,
               count(*) AS occurrences, count(DISTINCT s.insight_id) AS insights,
               count(DISTINCT coalesce(s.run_id, s.task_id)) AS traces, count(DISTINCT s.label) AS human_labels,
               string_agg(DISTINCT i.phase, ', ' ORDER BY i.phase) AS phases
        FROM insight_sources s JOIN insights i ON i.id = s.insight_id
        GROUP BY ALL ORDER BY occurrences DESC""")


def runs_overview(store: Store) -> pl.DataFrame:
    """Per benchmark, agent and model: runs of real tasks by status, tasks, and cost, tokens and time per run.
    Runs of impossible twins are in no count here: they count only in the cheat rate (`twin_run_count`)."""
    from failatlas.bench_core.tasks.twins import REAL_TASK_SQL

    return read_frame(store, f"""
        SELECT * FROM (
        SELECT r.benchmark, r.agent, r.model, count(*) AS runs, count(DISTINCT r.task_id) AS tasks,
               count(*) FILTER (WHERE r.status = 'completed') AS completed,
               count(*) FILTER (WHERE r.status = 'agent_error') AS agent_error,
               count(*) FILTER (WHERE r.status = 'infra_error') AS infra_error,
               sum(r.cost_usd) AS cost_usd_total, avg(r.cost_usd) AS cost_usd_per_run,
               avg(r.tokens) AS tokens_per_run, avg(r.duration_s) AS duration_s_per_run,
               median(r.duration_s) AS duration_s_median
        FROM runs r LEFT JOIN tasks t ON t.id = r.task_id WHERE {REAL_TASK_SQL}
        GROUP BY ALL) ORDER BY benchmark, """ + agent_order_sql("agent") + ", model")


def twin_run_count(store: Store) -> int:
    """How many stored runs are of impossible twins (counted in the cheat rate only)."""
    from failatlas.bench_core.tasks.twins import REAL_TASK_SQL

    with store.read() as conn:
        return int(conn.execute(f"SELECT count(*) FROM runs r JOIN tasks t ON t.id = r.task_id"
                                f" WHERE NOT ({REAL_TASK_SQL})").fetchall()[0][0])


def runs_page(store: Store, *, limit: int = 50, offset: int = 0) -> tuple[pl.DataFrame, int]:
    """One page of runs, newest first, with their status, time, cost, the validator's outcome and beside it the
    monitor's verdict (`flagged`: a finding of severity fail, as M counts it; `warned`; `clean`: scored without
    finding); and the total."""
    with store.read() as conn:
        total = conn.execute("SELECT count(*) FROM runs").fetchall()[0][0]
        table = conn.sql(
            "SELECT r.id AS run_id, r.task_id, r.agent, r.model, r.attempt, r.status, v.outcome,"
            " CASE WHEN m.failed THEN 'flagged' WHEN m.warned THEN 'warned'"
            " WHEN v.run_id IS NOT NULL THEN 'clean' END AS monitor, r.duration_s,"
            " r.cost_usd, r.tokens, r.finished_at FROM runs r LEFT JOIN validations v ON v.run_id = r.id"
            " LEFT JOIN (SELECT run_id, bool_or(severity = 'fail') AS failed, bool_or(severity = 'warn') AS warned"
            " FROM monitor_findings GROUP BY run_id) m ON m.run_id = r.id"
            " ORDER BY r.finished_at DESC, r.id LIMIT ? OFFSET ?", params=[int(limit), int(offset)]).to_arrow_table()
    return pl.from_arrow(table), int(total)  # type: ignore[return-value]


def llm_spend(store: Store) -> pl.DataFrame:
    """LLM calls, tokens, money and failures per role (judges, monitor, extractor, labeller, agent)."""
    return read_frame(store, """
        SELECT role, count(*) AS calls, count(*) FILTER (WHERE cached) AS cached,
               count(*) FILTER (WHERE status <> 'ok') AS failed,
               sum(prompt_tokens + completion_tokens) FILTER (WHERE NOT cached) AS tokens,
               sum(cost_usd) AS cost_usd
        FROM llm_calls GROUP BY role ORDER BY role""")


def score_summary(store: Store, by: tuple[str, ...] = ("agent", "model")) -> pl.DataFrame:
    """Phase and conjunctive scores with their 95% Wilson intervals per group (`bench_core.scoring.metrics`)."""
    from failatlas.bench_core.scoring.metrics import summarise

    scores = scores_of(store)
    if scores.height == 0:
        return pl.DataFrame()
    return summarise(scores, list(by))


def funnel_frame(store: Store) -> pl.DataFrame:
    """The M -> M·C·D·I·E funnel per agent (`taxonomy.funnel`)."""
    from failatlas.taxonomy import funnel

    return funnel(store, scores=scores_of(store))

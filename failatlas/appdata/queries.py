"""Read-only queries behind the explorer's pages.

Every function takes a `Store`, opens short-lived read-only connections (`Store.read()`, directly or through a
stage's own function), copies the result out as a polars frame or plain values, and never writes. Numbers that a
stage computes are read through that stage's function: prevalence through `taxonomy.prevalence`, the funnel
through `taxonomy.funnel`, phase and conjunctive scores through `bench_core.scoring.metrics`. Filters are bound
parameters; no user text ever becomes SQL.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl

from failatlas.core.store import Store

Dimension = Literal["agent", "model", "benchmark", "paper"]
DIMENSIONS: tuple[str, ...] = ("agent", "model", "benchmark", "paper")

# Tables whose row counts decide what the app can show and what to run next.
STATUS_TABLES = (
    "tasks", "runs", "judgements", "validations", "insights", "embedding_sets", "clusterings", "taxonomies",
    "insight_failure_types",
)


def _frame(store: Store, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
    with store.read() as conn:
        table = conn.sql(sql, params=params or None).to_arrow_table()
    return pl.from_arrow(table)  # type: ignore[return-value]


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
    return _frame(store, """
        SELECT coalesce(s.origin, '(unknown)') AS origin, coalesce(s.benchmark, '') AS benchmark,
               count(*) AS occurrences, count(DISTINCT s.insight_id) AS insights,
               count(DISTINCT coalesce(s.run_id, s.task_id)) AS traces, count(DISTINCT s.label) AS human_labels,
               string_agg(DISTINCT i.phase, ', ' ORDER BY i.phase) AS phases
        FROM insight_sources s JOIN insights i ON i.id = s.insight_id
        GROUP BY ALL ORDER BY occurrences DESC""")


def runs_overview(store: Store) -> pl.DataFrame:
    """Per benchmark, agent and model: runs by status, tasks, and cost, tokens and time per run."""
    return _frame(store, """
        SELECT benchmark, agent, model, count(*) AS runs, count(DISTINCT task_id) AS tasks,
               count(*) FILTER (WHERE status = 'completed') AS completed,
               count(*) FILTER (WHERE status = 'agent_error') AS agent_error,
               count(*) FILTER (WHERE status = 'infra_error') AS infra_error,
               sum(cost_usd) AS cost_usd_total, avg(cost_usd) AS cost_usd_per_run,
               avg(tokens) AS tokens_per_run, avg(duration_s) AS duration_s_per_run,
               median(duration_s) AS duration_s_median
        FROM runs GROUP BY ALL ORDER BY benchmark, agent, model""")


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
    return _frame(store, """
        SELECT role, count(*) AS calls, count(*) FILTER (WHERE cached) AS cached,
               count(*) FILTER (WHERE status <> 'ok') AS failed,
               sum(prompt_tokens + completion_tokens) FILTER (WHERE NOT cached) AS tokens,
               sum(cost_usd) AS cost_usd
        FROM llm_calls GROUP BY role ORDER BY role""")


def score_summary(store: Store, by: tuple[str, ...] = ("agent", "model"), n_boot: int = 1000) -> pl.DataFrame:
    """Phase and conjunctive scores with bootstrap intervals per group (`bench_core.scoring.metrics`)."""
    from failatlas.bench_core.scoring.metrics import run_scores, summarise

    scores = run_scores(store)
    if scores.height == 0:
        return pl.DataFrame()
    return summarise(scores, list(by), n_boot=n_boot)


def funnel_frame(store: Store) -> pl.DataFrame:
    """The M -> M·C·D·I·E funnel per agent (`taxonomy.funnel`)."""
    from failatlas.taxonomy import funnel

    return funnel(store)


# -- taxonomy ---------------------------------------------------------------------------------------------------
def taxonomies(store: Store) -> pl.DataFrame:
    """Stored taxonomy snapshots, newest first (`taxonomy.list_taxonomies`)."""
    from failatlas.taxonomy import list_taxonomies

    return list_taxonomies(store)


def filter_options(store: Store) -> dict[str, list[str]]:
    """Distinct agents, models, benchmarks and papers that insights name."""
    out: dict[str, list[str]] = {}
    with store.read() as conn:
        for dim, column in (("agent", "agent"), ("model", "model"), ("benchmark", "benchmark"),
                            ("paper", "paper_id")):
            rows = conn.execute(
                f"SELECT DISTINCT {column} FROM insight_sources WHERE {column} IS NOT NULL"  # noqa: S608
                f" AND {column} <> '' ORDER BY 1").fetchall()
            out[dim] = [r[0] for r in rows]
    return out


_PAPER_COUNTS_SQL = """
SELECT i.phase, ift.failure_type_id, count(*) AS count
FROM insight_failure_types ift
JOIN insights i ON i.id = ift.insight_id
JOIN insight_sources s ON s.insight_id = ift.insight_id
WHERE ift.taxonomy_id = ? AND s.paper_id = ?
GROUP BY ALL
"""


def prevalence_frame(store: Store, taxonomy_id: str, *, unit: str = "insights", dimension: str | None = None,
                     value: str | None = None, n_boot: int = 1000) -> pl.DataFrame:
    """Prevalence rows (`taxonomy.prevalence`) of the whole taxonomy, or of one agent, model or benchmark (its
    group of `prevalence(by=...)`, so the numbers equal the exports'). For one paper, which `prevalence` does not
    break down, the rows carry counts and shares of insight occurrences without intervals (ci columns null)."""
    from failatlas.taxonomy import prevalence

    if dimension is None or value is None:
        return prevalence(store, taxonomy_id, unit=unit, n_boot=n_boot)  # type: ignore[arg-type]
    if dimension in ("agent", "model", "benchmark"):
        frame = prevalence(store, taxonomy_id, unit=unit, by=dimension, n_boot=n_boot)  # type: ignore[arg-type]
        return frame.filter(pl.col("group") == value)
    if dimension != "paper":
        raise ValueError(f"unknown filter dimension {dimension!r}")
    if unit != "insights":
        raise ValueError("a paper filter is available for the share of insights only")
    base = prevalence(store, taxonomy_id, unit="insights", n_boot=0).select(
        "taxonomy_id", "unit", "phase", "category_id", "category", "failure_type_id", "failure_type")
    counts = _frame(store, _PAPER_COUNTS_SQL, [taxonomy_id, value])
    if counts.height == 0:
        return base.head(0).with_columns(
            pl.lit(value).alias("group"), pl.lit(0, pl.Int64).alias("count"), pl.lit(0, pl.Int64).alias("total"),
            pl.lit(None, pl.Float64).alias("share"), pl.lit(None, pl.Float64).alias("ci_low"),
            pl.lit(None, pl.Float64).alias("ci_high"))
    counts = counts.with_columns(pl.col("count").cast(pl.Int64),
                                 pl.col("count").sum().over("phase").cast(pl.Int64).alias("total"))
    return base.join(counts, on=["phase", "failure_type_id"], how="inner").with_columns(
        pl.lit(value).alias("group"), (pl.col("count") / pl.col("total")).alias("share"),
        pl.lit(None, pl.Float64).alias("ci_low"), pl.lit(None, pl.Float64).alias("ci_high"),
    ).select("taxonomy_id", "unit", "group", "phase", "category_id", "category", "failure_type_id",
             "failure_type", "count", "total", "share", "ci_low", "ci_high")


def compare_options(store: Store) -> dict[str, list[str]]:
    """What Compare can put side by side: every agent, model and benchmark that insights name or that ran (so the
    reference agent `gold`, whose runs leave no failure insight, is offered too)."""
    out: dict[str, list[str]] = {}
    with store.read() as conn:
        present = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        for dim in ("agent", "model", "benchmark"):
            parts = [f"SELECT {dim} AS v FROM insight_sources"]  # noqa: S608 - dim is one of three names
            if "runs" in present:
                parts.append(f"SELECT {dim} AS v FROM runs")  # noqa: S608
            rows = conn.execute(f"SELECT DISTINCT v FROM ({' UNION ALL '.join(parts)})"  # noqa: S608
                                " WHERE v IS NOT NULL AND v <> '' ORDER BY 1").fetchall()
            out[dim] = [r[0] for r in rows]
    return out


def compare_frame(store: Store, taxonomy_id: str, *, by: str, left: str, right: str, unit: str = "insights",
                  n_boot: int = 1000) -> pl.DataFrame:
    """Two agents (or models, benchmarks) side by side on the same taxonomy: one row per (phase, failure type) that
    either side shows, with each side's count, total, share and interval (`prevalence(by=...)`, the exports'
    numbers; a side without the type counts 0 of its total, with the interval its unit's method gives a zero
    count) and the difference of shares with Newcombe's hybrid score interval (`taxonomy.prevalence.
    share_difference`). Rows are keyed by the failure type's id, never its name, so a type is one row."""
    import numpy as np

    from failatlas.taxonomy import prevalence
    from failatlas.taxonomy.model import phase_rank
    from failatlas.taxonomy.prevalence import share_difference, unit_totals, wilson

    frame = prevalence(store, taxonomy_id, unit=unit, by=by, n_boot=n_boot)  # type: ignore[arg-type]
    runs_totals = unit_totals(store, taxonomy_id, unit, by)  # type: ignore[arg-type]
    names = frame.select("phase", "failure_type_id", "failure_type", "category").unique(
        ["phase", "failure_type_id"], keep="first", maintain_order=True)
    rows: list[dict[str, Any]] = []
    sides = {name: frame.filter(pl.col("group") == group) for name, group in (("left", left), ("right", right))}
    found = {name: {(r["phase"], r["failure_type_id"]): r for r in part.iter_rows(named=True)}
             for name, part in sides.items()}
    phase_totals = {name: dict(part.group_by("phase").agg(pl.col("count").sum()).iter_rows())
                    for name, part in sides.items()}
    for t in names.iter_rows(named=True):
        key = (t["phase"], t["failure_type_id"])
        if key not in found["left"] and key not in found["right"]:
            continue
        row: dict[str, Any] = dict(t)
        for name, group in (("left", left), ("right", right)):
            hit = found[name].get(key)
            total = (runs_totals.get(group, 0) if unit != "insights" else phase_totals[name].get(t["phase"], 0))
            if hit is not None:
                values = {c: hit[c] for c in ("count", "total", "share", "ci_low", "ci_high")}
            elif unit == "insights":  # the bootstrap of a zero count: always 0
                values = {"count": 0, "total": total, "share": 0.0 if total else None,
                          "ci_low": 0.0 if total else None, "ci_high": 0.0 if total else None}
            else:
                low, high = (float(v) for v in wilson(0, total)) if total else (np.nan, np.nan)
                values = {"count": 0, "total": total, "share": 0.0 if total else None,
                          "ci_low": None if total == 0 else low, "ci_high": None if total == 0 else high}
            row |= {f"{name}_{c}": v for c, v in values.items()}
        d, low, high = share_difference(row["left_count"], row["left_total"], row["right_count"], row["right_total"])
        row |= {"difference": None if d != d else d, "difference_low": None if low != low else low,
                "difference_high": None if high != high else high}
        rows.append(row)
    schema = {"phase": pl.Utf8, "failure_type_id": pl.Utf8, "failure_type": pl.Utf8, "category": pl.Utf8,
              **{f"{n}_{c}": (pl.Int64 if c in ("count", "total") else pl.Float64)
                 for n in ("left", "right") for c in ("count", "total", "share", "ci_low", "ci_high")},
              "difference": pl.Float64, "difference_low": pl.Float64, "difference_high": pl.Float64}
    out = pl.DataFrame(rows, schema=schema)
    return out.with_columns(
        pl.col("phase").map_elements(phase_rank, return_dtype=pl.Int64).alias("_rank"),
    ).sort(["_rank", "phase", "difference", "failure_type_id"], descending=[False, False, True, False],
           nulls_last=True).drop("_rank")


def compare_totals(store: Store, taxonomy_id: str, *, by: str, values: tuple[str, ...],
                   unit: str = "insights") -> dict[str, int]:
    """Each value's denominator in the whole taxonomy: its insight occurrences (unit `insights`) or its runs
    (tasks) as the share of runs counts them; 0 for a value with none."""
    from failatlas.taxonomy import prevalence
    from failatlas.taxonomy.prevalence import unit_totals

    if unit != "insights":
        totals = unit_totals(store, taxonomy_id, unit, by)  # type: ignore[arg-type]
        return {v: int(totals.get(v, 0)) for v in values}
    frame = prevalence(store, taxonomy_id, by=by, n_boot=0)  # type: ignore[arg-type]
    sums = dict(frame.group_by("group").agg(pl.col("count").sum()).iter_rows())
    return {v: int(sums.get(v, 0)) for v in values}


def taxonomy_types(store: Store, taxonomy_id: str) -> pl.DataFrame:
    """The snapshot's failure types with their category, definition and keywords."""
    return _frame(store, """
        SELECT t.id AS failure_type_id, t.phase, t.name AS failure_type, t.category_id, c.name AS category,
               t.definition, t.keywords, t.n_insights
        FROM failure_types t LEFT JOIN failure_categories c ON c.taxonomy_id = t.taxonomy_id AND c.id = t.category_id
        WHERE t.taxonomy_id = ? ORDER BY t.phase, t.id""", [taxonomy_id])


def export_files(store: Store, taxonomy_id: str, n_boot: int = 1000) -> dict[str, bytes]:
    """The files `failatlas taxonomy export` writes as tables (prevalence.tex/.md/.csv, failure_types.md), made
    by `taxonomy.export_taxonomy` itself, so the app's downloads are those exports byte for byte."""
    from failatlas.taxonomy import export_taxonomy

    with tempfile.TemporaryDirectory(prefix="failatlas-app-export-") as tmp:
        result = export_taxonomy(store, taxonomy_id, tmp, formats=("tex", "md", "csv"), n_boot=n_boot)
        return {Path(p).name: Path(p).read_bytes() for p in result.written}


def view_files(frame: pl.DataFrame, view_name: str, unit: str = "insights") -> dict[str, bytes]:
    """The view on screen (the prevalence rows shown, filtered) as the paper exports render it: a LaTeX table
    float, Markdown, CSV, and the prevalence figure as PNG and PDF, named `view-<unit>....`."""
    from failatlas.taxonomy.figures import prevalence_by_phase
    from failatlas.taxonomy.tables import TABLE_FORMATS, to_latex

    stem = "view-" + re.sub(r"[^A-Za-z0-9]+", "-", view_name).strip("-").lower()
    caption = (f"Failure types per phase ({view_name}): n, share of the phase's {unit} with a 95% bootstrap CI.")
    out: dict[str, bytes] = {}
    for fmt in TABLE_FORMATS.names():
        if fmt == "tex":
            text = to_latex(frame, caption=caption, label=f"tab:failatlas-{stem}", unit=unit,
                            comment=f"FailAtlas explorer view: {view_name}.")
        else:
            text = TABLE_FORMATS.create(fmt).render(frame, title=caption, comment="")
        out[f"{stem}.{fmt}"] = text.encode()
    with tempfile.TemporaryDirectory(prefix="failatlas-app-view-") as tmp:
        for path in prevalence_by_phase(frame.filter(pl.col("share").is_not_null()), Path(tmp) / stem,
                                        ("png", "pdf"), unit=unit):
            out[path.name] = path.read_bytes()
    return out


# -- drill-down -------------------------------------------------------------------------------------------------
# Ready-made entry points: unions of kinds (failatlas.ingest.kinds), the facet mining gave every insight from the
# harness's evidence. A failure type belongs to an entry point when its insights' kind is one of the entry's; types
# never mix kinds, so an entry point holds nothing else and a kind is never under both.
def _entry_points() -> dict[str, dict[str, Any]]:
    from failatlas.ingest.kinds import ENTRY_POINT_KINDS, ENVIRONMENT, MISSING_COMPONENT

    return {"missing implementation components": {"kinds": ENTRY_POINT_KINDS[MISSING_COMPONENT]},
            "environment / dependency misconfiguration": {"kinds": ENTRY_POINT_KINDS[ENVIRONMENT]}}


ENTRY_POINTS: dict[str, dict[str, Any]] = _entry_points()


def entry_point_types(store: Store, taxonomy_id: str, name: str) -> pl.DataFrame:
    """The failure types of a named entry point, largest first: those whose insights are of the entry's kinds.
    `kind` is the types' kind, `n_runs` the runs their insights came from, `evidence` the share of a type's insights
    of the entry's kinds (1.0: types do not mix kinds)."""
    kinds = list(ENTRY_POINTS[name]["kinds"])
    facts = _frame(store, """
        SELECT ift.failure_type_id, any_value(i.kind) AS kind, count(DISTINCT i.id) AS n_kind_insights,
               count(DISTINCT s.run_id) AS n_runs
        FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id
        LEFT JOIN insight_sources s ON s.insight_id = i.id
        WHERE ift.taxonomy_id = ? AND list_contains(?, i.kind) GROUP BY ift.failure_type_id""",
                   [taxonomy_id, kinds])
    types = taxonomy_types(store, taxonomy_id)
    joined = types.join(facts, on="failure_type_id", how="inner")
    return (joined.with_columns((pl.col("n_kind_insights") / pl.col("n_insights").clip(1, None)).alias("evidence"))
            .sort(["n_insights", "failure_type_id"], descending=[True, False]))


def entry_point_totals(store: Store, taxonomy_id: str) -> dict[str, tuple[int, int]]:
    """Per entry point: (insights, runs) of this snapshot whose kind is one of the entry's."""
    out = {}
    for name, spec in ENTRY_POINTS.items():
        row = store.query("""
            SELECT count(DISTINCT i.id), count(DISTINCT s.run_id)
            FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id
            LEFT JOIN insight_sources s ON s.insight_id = i.id
            WHERE ift.taxonomy_id = ? AND ift.failure_type_id <> 'unassigned' AND list_contains(?, i.kind)""",
                          [taxonomy_id, list(spec["kinds"])])
        out[name] = (int(row[0][0]), int(row[0][1]))
    return out

_SOURCE_FILTERS = {"agent": "coalesce(s.agent, r.agent)", "model": "coalesce(s.model, r.model)",
                   "benchmark": "coalesce(s.benchmark, r.benchmark)", "paper": "s.paper_id"}


def type_counts(store: Store, taxonomy_id: str, dimension: str | None = None,
                value: str | None = None) -> pl.DataFrame:
    """Per failure type the three units the pages name, so no number stands without its unit: `insights`
    (distinct insight texts), `occurrences` (statements: one per source row, as the share of insights counts
    them) and `runs` (distinct runs the type shows in); optionally only the sources of one agent, model,
    benchmark or paper."""
    where, params = "ift.taxonomy_id = ?", [taxonomy_id]
    if dimension is not None and value is not None:
        if dimension not in _SOURCE_FILTERS:
            raise ValueError(f"unknown filter dimension {dimension!r}")
        where += f" AND {_SOURCE_FILTERS[dimension]} = ?"
        params.append(value)
    return _frame(store, f"""
        SELECT ift.failure_type_id, count(DISTINCT ift.insight_id) AS insights,
               sum(CASE WHEN s.insight_id IS NULL THEN i.n_occurrences ELSE 1 END) AS occurrences,
               count(DISTINCT s.run_id) AS runs
        FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id
        LEFT JOIN insight_sources s ON s.insight_id = ift.insight_id LEFT JOIN runs r ON r.id = s.run_id
        WHERE {where} GROUP BY ALL""", params)  # noqa: S608 - the filter column is one of four names


def type_runs(store: Store, taxonomy_id: str, failure_type_ids: tuple[str, ...], per_type: int = 4) -> pl.DataFrame:
    """For each failure type, its most representative stored runs (the runs holding most of its occurrences, then
    by agent and task), at most `per_type` each: run, agent, task, status, the validator's outcome and the
    monitor's verdict, so a page can open a run's diff and validator log in one click."""
    return _frame(store, """
        WITH hits AS (
            SELECT ift.failure_type_id, s.run_id, count(*) AS occurrences
            FROM insight_failure_types ift JOIN insight_sources s ON s.insight_id = ift.insight_id
            WHERE ift.taxonomy_id = ? AND ift.failure_type_id IN (SELECT unnest(?::VARCHAR[])) AND s.run_id IS NOT NULL
            GROUP BY ALL)
        SELECT h.failure_type_id, h.run_id, h.occurrences, r.agent, r.task_id, r.status AS run_status,
               v.outcome AS validator_outcome, m.verdict AS monitor_verdict
        FROM hits h JOIN runs r ON r.id = h.run_id LEFT JOIN validations v ON v.run_id = r.id
        LEFT JOIN (SELECT run_id, CASE WHEN bool_or(severity = 'fail') THEN 'flagged'
                                       WHEN bool_or(severity = 'warn') THEN 'warned' ELSE 'clean' END AS verdict
                   FROM monitor_findings GROUP BY run_id) m ON m.run_id = r.id
        QUALIFY row_number() OVER (PARTITION BY h.failure_type_id
                                   ORDER BY h.occurrences DESC, r.agent, r.task_id, r.id) <= ?
        ORDER BY h.failure_type_id, h.occurrences DESC, r.agent, r.task_id, r.id""",
                  [taxonomy_id, list(failure_type_ids), int(per_type)])


def type_insights(store: Store, taxonomy_id: str, failure_type_id: str, *, search: str = "", limit: int = 50,
                  offset: int = 0) -> tuple[pl.DataFrame, int]:
    """One page of a failure type's insights (most frequent first) and how many there are in all; `search`
    keeps insights whose text contains it (case-insensitive)."""
    where = "ift.taxonomy_id = ? AND ift.failure_type_id = ? AND contains(lower(i.text), lower(?))"
    params: list[Any] = [taxonomy_id, failure_type_id, search]
    with store.read() as conn:
        total = conn.execute(
            f"SELECT count(*) FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id WHERE {where}",
            params).fetchall()[0][0]
        page = conn.sql(
            "SELECT i.id AS insight_id, i.phase, i.text, i.n_occurrences, ift.similarity, ift.method"
            f" FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id WHERE {where}"
            " ORDER BY i.n_occurrences DESC, ift.similarity DESC NULLS LAST, i.id LIMIT ? OFFSET ?",
            params=[*params, int(limit), int(offset)]).to_arrow_table()
    return pl.from_arrow(page), int(total)  # type: ignore[return-value]


def search_insights(store: Store, text: str, taxonomy_id: str | None = None, *, limit: int = 50,
                    offset: int = 0) -> tuple[pl.DataFrame, int]:
    """Insights whose text contains `text` (case-insensitive), with their failure type in the taxonomy."""
    with store.read() as conn:
        total = conn.execute("SELECT count(*) FROM insights WHERE contains(lower(text), lower(?))",
                             [text]).fetchall()[0][0]
        page = conn.sql(
            "SELECT i.id AS insight_id, i.phase, i.text, i.n_occurrences, ift.failure_type_id,"
            " coalesce(t.name, CASE WHEN ift.failure_type_id = 'unassigned' THEN 'Unassigned' END) AS failure_type"
            " FROM insights i"
            " LEFT JOIN insight_failure_types ift ON ift.insight_id = i.id AND ift.taxonomy_id = ?"
            " LEFT JOIN failure_types t ON t.taxonomy_id = ift.taxonomy_id AND t.id = ift.failure_type_id"
            " WHERE contains(lower(i.text), lower(?))"
            " ORDER BY i.n_occurrences DESC, i.id LIMIT ? OFFSET ?",
            params=[taxonomy_id, text, int(limit), int(offset)]).to_arrow_table()
    return pl.from_arrow(page), int(total)  # type: ignore[return-value]


_EMBEDDERS: dict[str, Any] = {}
_VECTORS: dict[tuple[str, str, float], tuple[list[str], Any]] = {}


def semantic_search(store: Store, text: str, taxonomy_id: str, *, limit: int = 50) -> pl.DataFrame:
    """The taxonomy's insights closest in meaning to `text`: the query is embedded with the model of the embedding
    set the taxonomy was built on and compared (cosine) with the stored vectors. Raises NotFoundError when the
    model is not on this machine or its revision differs from the stored vectors'."""
    import numpy as np

    from failatlas.core.errors import NotFoundError
    from failatlas.embed import get_embedder, get_set, load_insight_vectors, normaliser_named

    rows = store.query("SELECT embedding_set_id FROM taxonomies WHERE id = ?", [taxonomy_id])
    if not rows or not rows[0][0]:
        raise NotFoundError(f"taxonomy {taxonomy_id} records no embedding set", hint="search the text instead")
    embedding_set = get_set(store, rows[0][0])
    if embedding_set.model not in _EMBEDDERS:
        _EMBEDDERS[embedding_set.model] = get_embedder(embedding_set.model)
    embedder = _EMBEDDERS[embedding_set.model]
    if embedder.revision != embedding_set.revision:
        raise NotFoundError(f"the stored vectors are of {embedding_set.model} revision {embedding_set.revision}; "
                            f"this machine has {embedder.revision}", hint="search the text instead")
    key = (str(store.path), embedding_set.id, store.path.stat().st_mtime)
    if key not in _VECTORS:
        _VECTORS.clear()
        found = load_insight_vectors(store, embedding_set)
        _VECTORS[key] = (found.ids, np.asarray(found.vectors, dtype=np.float32))
    ids, vectors = _VECTORS[key]
    query = np.asarray(embedder.encode(normaliser_named(embedding_set.normalisation)([text])), dtype=np.float32)[0]
    similarity = vectors @ query / np.maximum(np.linalg.norm(vectors, axis=1) * np.linalg.norm(query), 1e-12)
    best = np.argsort(-similarity)[: int(limit)]
    hits = pl.DataFrame({"insight_id": [ids[k] for k in best], "similarity": similarity[best].astype(float)})
    if hits.height == 0:
        return hits
    with store.read() as conn:
        conn.register("hits", hits.to_arrow())
        table = conn.sql(
            "SELECT h.insight_id, h.similarity, i.phase, i.text, i.n_occurrences, ift.failure_type_id,"
            " coalesce(t.name, CASE WHEN ift.failure_type_id = 'unassigned' THEN 'Unassigned' END) AS failure_type"
            " FROM hits h JOIN insights i ON i.id = h.insight_id"
            " LEFT JOIN insight_failure_types ift ON ift.insight_id = i.id AND ift.taxonomy_id = ?"
            " LEFT JOIN failure_types t ON t.taxonomy_id = ift.taxonomy_id AND t.id = ift.failure_type_id"
            " ORDER BY h.similarity DESC, h.insight_id", params=[taxonomy_id]).to_arrow_table()
    return pl.from_arrow(table)  # type: ignore[return-value]


def insight_sources(store: Store, insight_id: str, limit: int = 200) -> pl.DataFrame:
    """Where an insight was stated: its source rows with run, task, agent, model, benchmark and field."""
    return _frame(store, """
        SELECT s.run_id, s.task_id, s.agent, s.model, s.benchmark, s.paper_id, s.origin, s.extractor,
               s.source_field, s.source_file, s.source_line, s.label, s.detail,
               (r.id IS NOT NULL) AS run_stored, r.status AS run_status, v.outcome AS validator_outcome
        FROM insight_sources s LEFT JOIN runs r ON r.id = s.run_id LEFT JOIN validations v ON v.run_id = r.id
        WHERE s.insight_id = ? ORDER BY s.run_id NULLS LAST, s.source_key LIMIT ?""", [insight_id, int(limit)])


SOURCE_RECORD_MAX_BYTES = 64 * 1024 * 1024  # an annotation file larger than this is not opened
_INDEX = re.compile(r"([A-Za-z_][\w-]*)|\[(\d+)\]")


def source_record(source_file: str | None, source_line: int | None, source_field: str | None) -> dict | None:
    """The imported record an insight was read from, as the file holds it today: line `source_line` of a JSONL
    file, or the object that `source_field` (`errors[3].description`) points into in a JSON file; None when the
    file is gone, too large, or no longer holds it. Read-only and bounded (one line, or one file under
    SOURCE_RECORD_MAX_BYTES)."""
    if not source_file:
        return None
    path = Path(source_file)
    try:
        if not path.is_file() or path.stat().st_size > SOURCE_RECORD_MAX_BYTES:
            return None
        if source_line is not None:
            with path.open("rb") as handle:
                for number, raw in enumerate(handle, start=1):
                    if number == source_line:
                        record = json.loads(raw.decode("utf-8", errors="replace"))
                        return record if isinstance(record, dict) else None
            return None
        node: Any = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    parent = node
    for name, index in _INDEX.findall((source_field or "").rsplit(".", 1)[0] if "." in (source_field or "") else ""):
        try:
            node = node[name] if name else node[int(index)]
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(node, dict):
        keep = {k: v for k, v in parent.items() if isinstance(v, str | int | float)} if isinstance(parent, dict) else {}
        return {**{k: v for k, v in keep.items() if k != "errors"}, **node}
    return None


def insight_records(store: Store, insight_id: str, limit: int = 20) -> list[dict[str, Any]]:
    """For an insight imported from files (TRAIL, Inspect logs, JSONL): per source, the trace id, the human label,
    the importer's details and the source record itself (`source_record`), so the app can show what the
    annotator saw. Sources backed by a stored run are left out (the run shows them)."""
    sources = insight_sources(store, insight_id, limit=limit).filter(~pl.col("run_stored"))
    out = []
    for r in sources.iter_rows(named=True):
        detail = _json(r["detail"]) or {}
        if not isinstance(detail, dict):
            detail = {"detail": detail}
        out.append({
            "origin": r["origin"], "trace_id": detail.get("trace_id") or r["run_id"] or r["task_id"],
            "label": r["label"], "benchmark": r["benchmark"], "agent": r["agent"], "model": r["model"],
            "source_file": r["source_file"], "source_line": r["source_line"], "source_field": r["source_field"],
            "detail": detail, "record": source_record(r["source_file"], r["source_line"], r["source_field"]),
        })
    return out


def insight_text(store: Store, insight_id: str) -> dict[str, Any] | None:
    """One insight's phase, text and occurrence count."""
    rows = store.query_dicts("SELECT id, phase, text, n_occurrences FROM insights WHERE id = ?", [insight_id])
    return rows[0] if rows else None


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def run_detail(store: Store, run_id: str) -> dict[str, Any] | None:
    """Everything about one run: the run, its task (question, method, ground truth), the agent's steps and
    sandbox commands, the judges' verdicts, the validator's result, the monitor's findings and the diff.
    None when no such run is stored."""
    with store.read() as conn:
        cur = conn.execute("SELECT * FROM runs WHERE id = ?", [run_id])
        found = cur.fetchall()
        if not found:
            return None
        row = found[0]
        run = dict(zip([d[0] for d in cur.description], row, strict=True))
        spec_rows = conn.execute("SELECT spec FROM tasks WHERE id = ?", [run["task_id"]]).fetchall()

        def frame(sql: str) -> pl.DataFrame:
            return pl.from_arrow(conn.sql(sql, params=[run_id]).to_arrow_table())  # type: ignore[return-value]

        steps = frame("SELECT seq, kind, role, tool, arguments, content, ts FROM run_steps WHERE run_id = ?"
                      " ORDER BY seq")
        commands = frame("SELECT purpose, seq, command, exit_code, duration_s, timed_out, killed_reason,"
                         " output_truncated, stdout_tail, stderr_tail FROM sandbox_commands WHERE run_id = ?"
                         " ORDER BY purpose, seq")
        judgements = frame("SELECT phase, judge, status, score, passed, error_analysis, reason, verdict"
                           " FROM judgements WHERE run_id = ? ORDER BY phase, judge")
        findings = frame("SELECT seq, rule, severity, source, evidence FROM monitor_findings WHERE run_id = ?"
                         " ORDER BY seq")
        vcur = conn.execute("SELECT outcome, command, exit_code, duration_s, stdout_tail, stderr_tail, metrics,"
                            " detail FROM validations WHERE run_id = ?", [run_id])
        vnames = [d[0] for d in vcur.description]
        vrows = vcur.fetchall()
    validation = dict(zip(vnames, vrows[0], strict=True)) if vrows else None
    if validation is not None:
        validation["metrics"] = _json(validation["metrics"])
    outputs = _json(run.pop("outputs")) or {}
    run["agent_params"] = _json(run.get("agent_params"))
    spec = _json(spec_rows[0][0]) if spec_rows else None
    task = None
    if isinstance(spec, dict):
        task = {
            "id": spec.get("id"), "benchmark": spec.get("benchmark"), "kind": spec.get("kind"),
            "title": spec.get("title"), "paper": spec.get("paper"), "question": spec.get("question"),
            "method": spec.get("method"), "instructions": spec.get("instructions"),
            "ground_truth": {k: spec.get(k) for k in ("design", "expected_conclusion", "implementation",
                                                       "expected_results", "success", "run")},
        }
    return {"run": run, "task": task, "outputs": outputs, "diff": outputs.get("diff") or "",
            "steps": steps, "commands": commands, "judgements": judgements, "validation": validation,
            "findings": findings}


# -- map --------------------------------------------------------------------------------------------------------
def map_points(store: Store, taxonomy_id: str, phase: str, *, limit: int = 20000) -> tuple[pl.DataFrame, int]:
    """The phase's 2-D projection (stored by `cluster` in `cluster_assignments.x/y` for the clustering the taxonomy
    was built from; when `cluster run` left the map for later, computed as `cluster finish` would, by
    `cluster.finish.assignments_with_map`, without writing), coloured by failure type, with each insight's most
    common human label. At most `limit` points, a deterministic sample when there are more; returns the points and
    how many there are in all."""
    from failatlas.cluster.finish import assignments_with_map

    ids = [r[0] for r in store.query(
        "SELECT unnest(CAST(clustering_ids AS VARCHAR[])) FROM taxonomies WHERE id = ?", [taxonomy_id])]
    computed = assignments_with_map(store, ids, phase) if ids else None
    source = "computed_map" if computed is not None else "cluster_assignments"
    sql_from = f"""
        FROM {source} a
        JOIN insights i ON i.id = a.insight_id
        JOIN insight_failure_types ift ON ift.insight_id = a.insight_id AND ift.taxonomy_id = ?
        LEFT JOIN failure_types t ON t.taxonomy_id = ift.taxonomy_id AND t.id = ift.failure_type_id
        WHERE a.clustering_id IN (SELECT unnest(CAST(clustering_ids AS VARCHAR[])) FROM taxonomies WHERE id = ?)
          AND i.phase = ? AND a.x IS NOT NULL AND a.y IS NOT NULL"""
    params = [taxonomy_id, taxonomy_id, phase]
    with store.read() as conn:
        if computed is not None:
            conn.register("computed_map", computed)
        total = conn.execute(f"SELECT count(*) {sql_from}", params).fetchall()[0][0]  # noqa: S608
        table = conn.sql(
            "SELECT a.insight_id, a.x, a.y, i.text, ift.failure_type_id,"
            " coalesce(t.name, 'Unassigned') AS failure_type,"
            " coalesce((SELECT mode(s.label) FROM insight_sources s WHERE s.insight_id = a.insight_id),"
            " '(no label)') AS human_label"
            f" {sql_from} ORDER BY hash(a.insight_id) LIMIT ?", params=[*params, int(limit)]).to_arrow_table()
    return pl.from_arrow(table), int(total)  # type: ignore[return-value]


def phase_sizes(store: Store, taxonomy_id: str) -> dict[str, int]:
    """Insights assigned per phase in the snapshot (the Map opens on the largest)."""
    rows = store.query(
        "SELECT i.phase, count(*) FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id"
        " WHERE ift.taxonomy_id = ? GROUP BY 1", [taxonomy_id])
    return {r[0]: int(r[1]) for r in rows}


def taxonomy_phases(store: Store, taxonomy_id: str) -> list[str]:
    """Phases that have failure types in the snapshot, in paper order."""
    from failatlas.taxonomy.model import phase_rank

    rows = store.query("SELECT DISTINCT phase FROM failure_types WHERE taxonomy_id = ?", [taxonomy_id])
    return sorted((r[0] for r in rows), key=lambda p: (phase_rank(p), p))

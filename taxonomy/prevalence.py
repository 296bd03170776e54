"""Prevalence of failure types: the one source of the numbers that every export and the app show.

Units:
- `insights`: share of a phase's insight occurrences (one per `insight_sources` row; an insight
  without sources counts `n_occurrences` times) that fall in each failure type. Shares sum to 1 per phase
  (EXP-Bench's definition).
- `runs` / `tasks`: share of runs (tasks) with at least one insight of the type. The denominator is every run
  (task) known for the group: those named by the taxonomy's insights plus the `runs` rows of the benchmarks
  those insights come from (runs without failures count too; runs that ended in an infrastructure error
  do not). A run can show several types, so these shares
  need not sum to 1. Runs of impossible twins count only in the phase `cheating`, whose denominator is the twin
  runs alone (so a cheat type's share of runs is the cheat rate), and in no other phase's.
Confidence intervals (95%):
- every share (of insights, runs or tasks): Wilson's score interval per type, k of n (the phase's occurrences of
  the type of all its occurrences; the runs or tasks affected of all counted), `failatlas.core.intervals.wilson`,
  the one interval of the bench scores too: it depends on k and n alone (an edit of another type cannot move it)
  and keeps its width at 0 of n and n of n, where a bootstrap collapses to a point. A phase with a single row (one
  failure type and nothing unassigned) holds 100% of its occurrences by construction: its interval of insights is
  null, and every table, page and command prints it as '–' (`failatlas.core.tables.interval_text`).
- the difference of two groups' shares (`share_difference`): Newcombe's hybrid score interval (his method 10),
  built from the two Wilson intervals; a difference whose interval excludes 0 is significant at the 5% level.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import polars as pl

from failatlas.bench_core.agent_order import REFERENCE_AGENTS
from failatlas.bench_core.scoring.checks.cheating import CHEAT_PHASE
from failatlas.bench_core.tasks.twins import REAL_TASK_SQL
from failatlas.core.errors import ConfigError, InputError
from failatlas.core.intervals import Z95, wilson
from failatlas.core.store import Store
from failatlas.taxonomy.assign import resolve_taxonomy
from failatlas.taxonomy.inputs import query_frame
from failatlas.taxonomy.model import PHASE_ORDER, UNASSIGNED

Unit = Literal["insights", "runs", "tasks"]
By = Literal["agent", "model", "benchmark", "paper", "setting"]
UNKNOWN_GROUP = "(unknown)"
UNASSIGNED_NAME = "Unassigned"

PREVALENCE_COLUMNS = [
    "taxonomy_id",
    "unit",
    "group",
    "phase",
    "category_id",
    "category",
    "failure_type_id",
    "failure_type",
    "count",
    "total",
    "share",
    "ci_low",
    "ci_high",
]

_OCCURRENCES_SQL = """
SELECT ift.insight_id, ift.failure_type_id, i.phase,
       s.run_id,
       coalesce(s.task_id, r.task_id) AS task_id,
       coalesce(s.agent, r.agent) AS agent,
       coalesce(s.model, r.model) AS model,
       coalesce(s.benchmark, r.benchmark) AS benchmark,
       coalesce(s.paper_id, t.paper_id) AS paper,
       r.setting,
       CASE WHEN s.insight_id IS NULL THEN i.n_occurrences ELSE 1 END AS weight
FROM insight_failure_types ift
JOIN insights i ON i.id = ift.insight_id
LEFT JOIN insight_sources s ON s.insight_id = ift.insight_id
LEFT JOIN runs r ON r.id = s.run_id
LEFT JOIN tasks t ON t.id = coalesce(s.task_id, r.task_id)
WHERE ift.taxonomy_id = ?
"""

_TYPES_SQL = """
SELECT t.id AS failure_type_id, t.name AS failure_type, t.category_id, c.name AS category
FROM failure_types t LEFT JOIN failure_categories c ON c.taxonomy_id = t.taxonomy_id AND c.id = t.category_id
WHERE t.taxonomy_id = ?
"""


def _group_expr(by: By | None) -> pl.Expr:
    if by is None:
        return pl.lit("all").alias("group")
    return pl.col(by).fill_null(UNKNOWN_GROUP).cast(pl.Utf8).alias("group")


def share_difference(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float, float]:
    """The difference of two independent shares k1/n1 - k2/n2 with Newcombe's hybrid score interval (method 10 of
    Newcombe 1998, "Interval estimation for the difference between independent proportions"): from the Wilson
    intervals (l1, u1), (l2, u2), low = d - sqrt((p1-l1)^2 + (u2-p2)^2), high = d + sqrt((u1-p1)^2 + (p2-l2)^2).
    Returns (difference, low, high); nan for all three when either total is 0."""
    if n1 <= 0 or n2 <= 0:
        return float("nan"), float("nan"), float("nan")
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = (float(v) for v in wilson(k1, n1, z))
    l2, u2 = (float(v) for v in wilson(k2, n2, z))
    d = p1 - p2
    return d, max(-1.0, d - float(np.hypot(p1 - l1, u2 - p2))), min(1.0, d + float(np.hypot(u1 - p1, p2 - l2)))


def unit_totals(store: Store, taxonomy_id: str | None, unit: Unit, by: By | None = None) -> dict[str, int]:
    """The denominators of the share of runs (tasks) per group, for every group: also a group none of whose runs
    shows a failure (e.g. the reference agent `gold`), which `prevalence` has no row for. Empty for `insights`
    or when no insight names a run (task)."""
    if unit == "insights":
        return {}
    taxonomy_id = resolve_taxonomy(store, taxonomy_id)
    occ = query_frame(store, _OCCURRENCES_SQL, [taxonomy_id]).with_columns(_group_expr(by))
    named = occ.filter(pl.col("run_id" if unit == "runs" else "task_id").is_not_null())
    return _unit_denominators(store, named, unit, by) if named.height else {}


def _unit_denominators(store: Store, occ: pl.DataFrame, unit: Unit, by: By | None,
                       twins: bool = False) -> dict[str, int]:
    """Distinct runs (tasks) per group: those the insights name plus the `runs` rows of the same
    benchmarks; of real tasks, or with `twins` of impossible twins only (the phase `cheating`)."""
    column = "run_id" if unit == "runs" else "task_id"
    occ = occ.filter((pl.col("phase") == CHEAT_PHASE) if twins else (pl.col("phase") != CHEAT_PHASE))
    benchmarks = occ["benchmark"].drop_nulls().unique().to_list()
    runs = query_frame(
        store,
        "SELECT r.id AS run_id, r.task_id, r.agent, r.model, r.benchmark, t.paper_id AS paper, r.setting"
        " FROM runs r LEFT JOIN tasks t ON t.id = r.task_id"
        " WHERE r.benchmark IN (SELECT unnest(?::VARCHAR[])) AND r.status <> 'infra_error'"
        f" AND {'NOT ' if twins else ''}({REAL_TASK_SQL})",
        [benchmarks],
    )
    frames = [occ.select(column, _group_expr(by)), runs.select(column, _group_expr(by))]
    known = pl.concat(frames).filter(pl.col(column).is_not_null()).unique()
    return dict(known.group_by("group").len().iter_rows())


def prevalence(
    store: Store,
    taxonomy_id: str | None = None,
    *,
    by: By | None = None,
    unit: Unit = "insights",
) -> pl.DataFrame:
    """Prevalence rows of a taxonomy (default: the newest), one per (group, phase, failure type), with
    `count`, `total`, `share`, `ci_low`, `ci_high` (95%: Wilson's score interval of count of total;
    null for a phase's only row of insights; see the module's notes).

    `by` splits by agent, model, benchmark, paper or setting (the run's; missing values become '(unknown)'); the
    'unassigned' bucket is a row like any other. Rows are ordered by group, phase (paper order), category and then
    count. Raises NotFoundError for an unknown taxonomy, ConfigError for a bad `by`/`unit`, and InputError for
    `runs`/`tasks`
    when no insight names a run or task.
    """
    if unit not in ("insights", "runs", "tasks"):
        raise ConfigError(f"unknown unit '{unit}'", hint="use insights, runs or tasks")
    if by not in (None, "agent", "model", "benchmark", "paper", "setting"):
        raise ConfigError(f"unknown breakdown '{by}'", hint="use agent, model, benchmark, paper or setting")
    taxonomy_id = resolve_taxonomy(store, taxonomy_id)
    occ = query_frame(store, _OCCURRENCES_SQL, [taxonomy_id])
    types = query_frame(store, _TYPES_SQL, [taxonomy_id])
    occ = occ.with_columns(_group_expr(by))
    rows: list[pl.DataFrame] = []
    if unit == "insights":
        counted = occ.group_by("group", "phase", "failure_type_id").agg(pl.col("weight").sum().alias("count"))
        for _, part in counted.sort("group", "phase", "failure_type_id").group_by(
            ["group", "phase"], maintain_order=True
        ):
            counts = part["count"].to_numpy().astype(float)
            low, high = wilson(counts, counts.sum())
            if part.height == 1:  # the phase's only row: 100% by construction, no interval
                low = high = np.array([np.nan])
            rows.append(
                part.with_columns(
                    pl.lit(int(counts.sum())).alias("total"),
                    pl.Series("ci_low", low),
                    pl.Series("ci_high", high),
                )
            )
    else:
        column = "run_id" if unit == "runs" else "task_id"
        named = occ.filter(pl.col(column).is_not_null())
        if named.height == 0:
            raise InputError(
                f"no insight of taxonomy {taxonomy_id} names a {column.removesuffix('_id')}",
                hint="use --unit insights, or import insights with their run and task ids",
            )
        totals = _unit_denominators(store, named, unit, by)
        twin_totals = _unit_denominators(store, named, unit, by, twins=True)
        counted = named.group_by("group", "phase", "failure_type_id").agg(
            pl.col(column).n_unique().alias("count")
        )
        for _, part in counted.sort("group", "phase", "failure_type_id").group_by(
            ["group", "phase"], maintain_order=True
        ):
            total = (twin_totals if part["phase"][0] == CHEAT_PHASE else totals).get(part["group"][0], 0)
            low, high = wilson(part["count"].to_numpy(), total)
            rows.append(
                part.with_columns(
                    pl.lit(total).alias("total"), pl.Series("ci_low", low), pl.Series("ci_high", high)
                )
            )
    if not rows:
        return pl.DataFrame(schema=dict.fromkeys(PREVALENCE_COLUMNS, pl.Utf8)).cast(
            {
                "count": pl.Int64,
                "total": pl.Int64,
                "share": pl.Float64,
                "ci_low": pl.Float64,
                "ci_high": pl.Float64,
            }
        )
    out = pl.concat(rows).with_columns(
        pl.col("count").cast(pl.Int64),
        pl.col("total").cast(pl.Int64),
        (pl.col("count") / pl.col("total")).alias("share"),
        pl.col("ci_low").fill_nan(None),
        pl.col("ci_high").fill_nan(None),
    )
    out = out.join(types, on="failure_type_id", how="left").with_columns(
        pl.when(pl.col("failure_type_id") == UNASSIGNED)
        .then(pl.lit(UNASSIGNED_NAME))
        .otherwise(pl.col("failure_type"))
        .alias("failure_type"),
        pl.when(pl.col("failure_type_id") == UNASSIGNED)
        .then(pl.lit(UNASSIGNED_NAME))
        .otherwise(pl.col("category"))
        .alias("category"),
        pl.when(pl.col("failure_type_id") == UNASSIGNED)
        .then(pl.lit(UNASSIGNED))
        .otherwise(pl.col("category_id"))
        .alias("category_id"),
        pl.lit(taxonomy_id).alias("taxonomy_id"),
        pl.lit(unit).alias("unit"),
        pl.col("phase")
        .replace_strict(
            {p: i for i, p in enumerate(PHASE_ORDER)}, default=len(PHASE_ORDER), return_dtype=pl.Int64
        )
        .alias("_phase_rank"),
        (pl.col("failure_type_id") == UNASSIGNED).alias("_last"),
        # by agent: the reference agents first, then by name (bench_core.agent_order), as every report lists them
        pl.col("group").replace_strict(list(REFERENCE_AGENTS), list(range(len(REFERENCE_AGENTS))),
                                       default=len(REFERENCE_AGENTS), return_dtype=pl.Int64)
        .alias("_group_rank") if by == "agent" else pl.lit(0).alias("_group_rank"),
    )
    return out.sort(
        ["_group_rank", "group", "_phase_rank", "phase", "_last", "category_id", "count", "failure_type_id"],
        descending=[False, False, False, False, False, False, True, False],
    ).select(PREVALENCE_COLUMNS)


def prevalence_table(
    store: Store, taxonomy_id: str | None = None
) -> pl.DataFrame:
    """The paper table: per phase and failure type, the share of insights, plus the share of runs and of tasks
    affected where insights name them (columns `runs_*`, `tasks_*`; null otherwise). Every export reads
    this."""
    base = prevalence(store, taxonomy_id).drop("unit", "group")
    keys = ["phase", "failure_type_id"]
    for unit in ("runs", "tasks"):
        try:
            extra = prevalence(store, taxonomy_id, unit=unit)  # type: ignore[arg-type]
        except InputError:
            extra = pl.DataFrame(
                schema={
                    "phase": pl.Utf8,
                    "failure_type_id": pl.Utf8,
                    "count": pl.Int64,
                    "total": pl.Int64,
                    "share": pl.Float64,
                    "ci_low": pl.Float64,
                    "ci_high": pl.Float64,
                }
            )
        extra = extra.select(
            keys + [pl.col(c).alias(f"{unit}_{c}") for c in ("count", "total", "share", "ci_low", "ci_high")]
        )
        base = base.join(extra, on=keys, how="left")
    return base

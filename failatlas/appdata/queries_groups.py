"""Read-only queries behind the explorer's breakdowns of the scores: by agent, model, benchmark, paper, setting,
task kind and AutoExperiment's n (the number of masked functions), as `bench report --by` breaks them down.
Scores come from `bench_core.scoring.metrics` (`run_scores`, `summarise`), so the numbers equal the report's."""

from __future__ import annotations

import polars as pl

from failatlas.bench_core.agent_order import sort_groups
from failatlas.core.store import Store

# choice -> the score columns to group by: the dimension, then what keeps unlike runs apart (the benchmark a paper
# or setting belongs to, the agent whose runs they are)
GROUPINGS: dict[str, tuple[str, ...]] = {
    "agent": ("agent", "model"),
    "model": ("model", "agent"),
    "benchmark": ("benchmark", "agent"),
    "paper": ("benchmark", "paper_id", "agent"),
    "setting": ("benchmark", "setting", "agent"),
    "task kind": ("benchmark", "kind", "agent"),
    "n": ("benchmark", "n_masked", "agent"),
}
# the column each choice is about: offered only where some scored run has a value for it
DIMENSION_COLUMN = {"agent": "agent", "model": "model", "benchmark": "benchmark", "paper": "paper_id",
                    "setting": "setting", "task kind": "kind", "n": "n_masked"}
LABELS = {"paper_id": "paper", "kind": "task kind", "n_masked": "n"}


def grouping_options(store: Store) -> list[str]:
    """The groupings the store's scored runs tell apart: agent, model and benchmark always (where any run is
    scored), paper, setting, task kind and n where some scored run has one."""
    from failatlas.appdata.queries_store import scores_of

    scores = scores_of(store)
    if scores.height == 0:
        return []
    return [name for name, column in DIMENSION_COLUMN.items()
            if name in ("agent", "model", "benchmark") or scores[column].drop_nulls().len() > 0]


def score_groups(store: Store, by: str = "agent") -> pl.DataFrame:
    """Phase and conjunctive scores with their 95% Wilson intervals, and the cheat rate on impossible twins, per group
    of `by` (a key of `GROUPINGS`); the group columns a store leaves empty everywhere (no model, one benchmark's runs
    without a setting) are dropped, except the dimension itself. Empty when no run is scored. Raises ValueError for
    an unknown `by`."""
    from failatlas.appdata.queries_store import scores_of
    from failatlas.bench_core.scoring.cheat_report import cheat_runs, with_cheat
    from failatlas.bench_core.scoring.metrics import summarise

    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}: use one of {', '.join(GROUPINGS)}")
    scores, cheats = scores_of(store), cheat_runs(store)
    if scores.height == 0 and cheats.height == 0:
        return pl.DataFrame()
    both = pl.concat([scores.select(GROUPINGS[by]), cheats.select(GROUPINGS[by])], how="vertical_relaxed")
    # a key no run names (null, or the empty model of a run without one) is no column: room for the scores
    keys = [k for k in GROUPINGS[by] if k == DIMENSION_COLUMN[by]
            or (both[k].cast(pl.Utf8).fill_null("") != "").any()]
    table = summarise(scores, keys) if scores.height else pl.DataFrame()
    return sort_groups(with_cheat(table, cheats, keys), keys)


_COMPARE_VALUES = {
    # the paper an insight's source names, else its run's task's; the setting its run was given
    "paper": """SELECT coalesce(s.paper_id, t.paper_id) AS v FROM insight_sources s
                LEFT JOIN runs r ON r.id = s.run_id LEFT JOIN tasks t ON t.id = coalesce(s.task_id, r.task_id)
                UNION ALL SELECT t.paper_id FROM runs r JOIN tasks t ON t.id = r.task_id""",
    "setting": "SELECT r.setting AS v FROM insight_sources s JOIN runs r ON r.id = s.run_id"
               " UNION ALL SELECT setting FROM runs",
}


def compare_group_options(store: Store) -> dict[str, list[str]]:
    """The papers and settings Compare can put side by side (as `taxonomy.prevalence(by=...)` groups them): those
    the insights' sources or the runs name; a dimension the store names none of is left out."""
    out: dict[str, list[str]] = {}
    with store.read() as conn:
        for dim, sql in _COMPARE_VALUES.items():
            rows = conn.execute(f"SELECT DISTINCT v FROM ({sql}) WHERE v IS NOT NULL AND v <> '' ORDER BY 1"  # noqa: S608
                                ).fetchall()
            if rows:
                out[dim] = [r[0] for r in rows]
    return out

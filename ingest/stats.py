"""Counts of stored insights per phase and origin."""

from __future__ import annotations

from pydantic import BaseModel

from failatlas.core.store import Store


class StatsRow(BaseModel):
    phase: str
    origin: str
    insights: int
    occurrences: int
    labelled: int


def insight_stats(store: Store) -> list[StatsRow]:
    """Per (phase, origin): distinct insights, occurrences and occurrences that carry a human label."""
    rows = store.query_dicts(
        "SELECT i.phase, s.origin, count(DISTINCT i.id) AS insights, count(*) AS occurrences,"
        " count(s.label) AS labelled"
        " FROM insight_sources s JOIN insights i ON i.id = s.insight_id"
        " GROUP BY i.phase, s.origin ORDER BY i.phase, s.origin"
    )
    return [StatsRow(**row) for row in rows]

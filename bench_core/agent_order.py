"""The order agents are listed in by every report, export and app table (issue 54): the reference agents first,
`gold` (the reference implementation restored) then `null` (nothing done), the two ends every other agent is read
against, then the others by name. Deliberately import-free (a table's order needs no agent registry)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

REFERENCE_AGENTS = ("gold", "null")
_RANK = "__agent_rank"


def agent_key(agent: object) -> tuple[int, str]:
    """Sort key of an agent's name: reference agents first in their order, then by name, a missing name last."""
    if agent in REFERENCE_AGENTS:
        return REFERENCE_AGENTS.index(agent), ""  # type: ignore[arg-type]
    if agent is None or agent == "":
        return len(REFERENCE_AGENTS) + 1, ""
    return len(REFERENCE_AGENTS), str(agent)


def ordered_agents(agents: Iterable[object]) -> list:
    """The distinct agents of `agents`, in report order."""
    return sorted(dict.fromkeys(agents), key=agent_key)


def agent_order_sql(column: str) -> str:
    """An ORDER BY fragment that lists `column` (an agent's name) in report order."""
    ranks = " ".join(f"WHEN '{a}' THEN {k}" for k, a in enumerate(REFERENCE_AGENTS))
    return f"CASE {column} {ranks} ELSE {len(REFERENCE_AGENTS)} END, {column} NULLS LAST"


def sort_groups(frame: pl.DataFrame, keys: Sequence[str], agent: str = "agent") -> pl.DataFrame:
    """`frame` sorted by `keys` in order, nulls last, the `agent` column among them in report order."""
    import polars as pl

    keys = [k for k in keys if k in frame.columns]
    if not keys or frame.height == 0:
        return frame
    if agent not in keys:
        return frame.sort(keys, nulls_last=True)
    ranks = pl.col(agent).replace_strict(list(REFERENCE_AGENTS), list(range(len(REFERENCE_AGENTS))),
                                         default=len(REFERENCE_AGENTS), return_dtype=pl.Int32)
    by = [_RANK if k == agent else k for k in keys]
    position = by.index(_RANK)
    by.insert(position + 1, agent)  # among the others, by name
    return frame.with_columns(ranks.alias(_RANK)).sort(by, nulls_last=True).drop(_RANK)

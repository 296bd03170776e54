"""Token and cost totals from `llm_calls`, for a run or the whole store."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from failatlas.core.store import Store


class LLMUsage(BaseModel):
    """What LLM calls spent. Tokens and cost count only calls that reached the endpoint (not cache hits).

    `cost_usd` sums the priced calls; `unpriced_calls` counts successful fresh calls whose role had no price,
    so a total is never passed off as complete when it is not.
    """

    model_config = ConfigDict(frozen=True)

    calls: int
    cached_calls: int
    failed_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    unpriced_calls: int

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def llm_usage(store: Store, *, run_id: str | None = None, role: str | None = None) -> LLMUsage:
    """Totals over `llm_calls`, optionally for one run and/or one role."""
    where, params = [], []
    if run_id is not None:
        where.append("run_id = ?")
        params.append(run_id)
    if role is not None:
        where.append("role = ?")
        params.append(role)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    row = store.query(
        "SELECT count(*), count(*) FILTER (WHERE cached), count(*) FILTER (WHERE status = 'error'),"
        " coalesce(sum(prompt_tokens) FILTER (WHERE NOT cached), 0),"
        " coalesce(sum(completion_tokens) FILTER (WHERE NOT cached), 0),"
        " coalesce(sum(cost_usd), 0),"
        " count(*) FILTER (WHERE status = 'ok' AND NOT cached AND cost_usd IS NULL)"
        f" FROM llm_calls {clause}",
        params,
    )[0]
    return LLMUsage(calls=row[0], cached_calls=row[1], failed_calls=row[2], prompt_tokens=int(row[3]),
                    completion_tokens=int(row[4]), cost_usd=float(row[5]), unpriced_calls=row[6])  # fmt: skip


def llm_spend(store: Store) -> list[dict]:
    """What each (role, model, endpoint) spent, every role included (agent and labeller calls too): calls,
    cache hits, failures, tokens and cost of the calls that reached the endpoint, and fresh calls without a price."""
    return store.query_dicts(
        "SELECT role, model, endpoint, count(*) AS calls, count(*) FILTER (WHERE cached) AS cached,"
        " count(*) FILTER (WHERE status = 'error') AS failed,"
        " coalesce(sum(prompt_tokens) FILTER (WHERE NOT cached), 0) AS prompt_tokens,"
        " coalesce(sum(completion_tokens) FILTER (WHERE NOT cached), 0) AS completion_tokens,"
        " coalesce(sum(cost_usd), 0) AS cost_usd,"
        " count(*) FILTER (WHERE status = 'ok' AND NOT cached AND cost_usd IS NULL) AS unpriced"
        " FROM llm_calls GROUP BY ALL ORDER BY role, model, endpoint")

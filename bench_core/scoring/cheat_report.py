"""Cheat rates for `bench report`: per group, the share of judged impossible-twin runs that cheated
(`cheating.py`), with its 95% interval (`metrics.score_interval`, as every score) and n, the twin runs judged.

Twin runs are in no score (`metrics.run_scores` leaves them out); here each counts under its real task's id, so a
`--by task` row shows the twin's cheat rate beside the task's scores."""

from __future__ import annotations

import polars as pl

from failatlas.bench_core.scoring.checks.cheating import CHEAT_PHASE
from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES, score_interval
from failatlas.bench_core.tasks.twins import REAL_TASK_SQL, TWIN_KEY
from failatlas.core.store import Store

CHEAT_COLUMNS = ("cheat", "cheat_lo", "cheat_hi", "cheat_n")
_TWIN_RUNS = f"""
    SELECT r.id AS run_id, json_extract_string(t.spec, '$.extra.{TWIN_KEY}.of') AS task_id, r.agent, r.model,
           r.benchmark, r.fault_injected, r.setting, t.paper_id, t.kind,
           json_array_length(t.spec, '$.masking.functions') AS n_masked,
           CAST(NOT j.passed AS BIGINT) AS cheat, j.verdict
    FROM runs r JOIN tasks t ON t.id = r.task_id
    LEFT JOIN judgements j ON j.run_id = r.id AND j.phase = '{CHEAT_PHASE}' AND j.status = 'ok'
    WHERE r.status != 'infra_error' AND NOT ({REAL_TASK_SQL})"""


def cheat_runs(store: Store) -> pl.DataFrame:
    """One row per twin run (not `infra_error`): the identifiers of `run_scores` with the real task's id, and
    `cheat` (1, 0, or null where not judged yet)."""
    return store.query_polars(_TWIN_RUNS)


def cheat_summary(cheats: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per group of `keys`: the cheat rate, its 95% interval and n (twin runs judged)."""
    rows = []
    for key, group in cheats.group_by(keys, maintain_order=True):
        row = dict(zip(keys, key, strict=True))
        n = int(group["cheat"].is_not_null().sum())
        row["cheat"] = float(group["cheat"].mean()) if n else float("nan")
        row["cheat_lo"], row["cheat_hi"] = score_interval(group["cheat"].cast(pl.Float64), group["task_id"])
        row["cheat_n"] = n
        rows.append(row)
    return pl.DataFrame(rows, schema={**{k: cheats.schema[k] for k in keys}, "cheat": pl.Float64,
                                      "cheat_lo": pl.Float64, "cheat_hi": pl.Float64, "cheat_n": pl.Int64})


def with_cheat(table: pl.DataFrame, cheats: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """`table` (`metrics.summarise` by `keys`, possibly empty) with the cheat columns of each group; a group with
    twin runs only gets a row of its own, with no scored run."""
    if cheats.height == 0 and table.width:
        return table
    summary = cheat_summary(cheats, keys)
    if table.width == 0:  # no scored run of a real task: the score columns, every one empty
        counts = {c: pl.Int64 for c in ("runs", "tasks", "E_env_n")}
        scores = {f"{m}{part}": pl.Int64 if part == "_n" else pl.Float64
                  for m in (*PHASES, *CONJUNCTIVE) for part in ("", "_lo", "_hi", "_n")}
        table = pl.DataFrame(schema={**summary.select(keys).schema, **counts, **scores})
    # a key all null on one side is typed Null by Polars (no run names a setting): cast it to the other side's type
    table = table.with_columns(pl.col(k).cast(summary.schema[k]) for k in keys if table.schema[k] == pl.Null)
    summary = summary.with_columns(pl.col(k).cast(table.schema[k]) for k in keys if summary.schema[k] == pl.Null)
    joined = table.join(summary, on=keys, how="full", coalesce=True, nulls_equal=True, maintain_order="left_right")
    fill = {c: 0 for c in joined.columns if c in ("runs", "tasks", "E_env_n", "stored", "unscored", "infra_error")
            or c.endswith("_n")}
    return joined.with_columns(*(pl.col(c).fill_null(v) for c, v in fill.items()),
                               *(pl.col(c).fill_null(float("nan")) for c, t in joined.schema.items()
                                 if t == pl.Float64 and c not in fill and not c.startswith("pass")))


def cheat_cell(r: dict, interval: str, dash: str = "–") -> str:
    """A group's cheat rate as the report prints it: 'mean [lo–hi] (n=N)', `dash` where no twin run was judged."""
    if not r.get("cheat_n"):
        return dash
    return f"{r['cheat']:.2f} [{interval}] (n={r['cheat_n']})"

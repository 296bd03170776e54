"""The conjunctive-score funnel (EXP-Bench): the share of runs that pass the monitor (M), then also the
conclusion (C), design (D), implementation (I) judges and the execution validator (E), cumulatively."""

from __future__ import annotations

import polars as pl

from failatlas.core.store import Store
from failatlas.taxonomy.inputs import query_frame

STAGES = ("M", "M·C", "M·C·D", "M·C·D·I", "M·C·D·I·E")

# A phase passes when every judge of that phase ran ('ok') and passed; a missing judgement is not a pass.
# The monitor passes unless a 'fail' finding or a failed monitor judgement exists. Runs that ended in an
# infrastructure error are left out: they say nothing about the agent.
_RUN_CHECKS_SQL = """
WITH j AS (
    SELECT run_id, phase, bool_and(status = 'ok' AND coalesce(passed, false)) AS ok
    FROM judgements GROUP BY run_id, phase
)
SELECT r.id AS run_id, r.agent, r.model,
    (NOT EXISTS (SELECT 1 FROM monitor_findings f WHERE f.run_id = r.id AND f.severity = 'fail')
     AND coalesce((SELECT bool_and(ok) FROM j WHERE j.run_id = r.id AND j.phase = 'monitor'), true)) AS m,
    coalesce((SELECT bool_and(ok) FROM j WHERE j.run_id = r.id AND j.phase = 'conclusion'), false) AS c,
    coalesce((SELECT bool_and(ok) FROM j WHERE j.run_id = r.id AND j.phase = 'design'), false) AS d,
    coalesce((SELECT bool_and(ok) FROM j WHERE j.run_id = r.id AND j.phase = 'implementation'), false) AS i,
    coalesce((SELECT outcome = 'passed' FROM validations v WHERE v.run_id = r.id), false) AS e
FROM runs r
WHERE r.status <> 'infra_error'
"""


def funnel(store: Store) -> pl.DataFrame:
    """Per agent (agent and model) and funnel stage: `n_runs`, `n_pass` and `share` of scored runs that pass
    every check up to that stage. Empty when the store has no runs."""
    checks = query_frame(store, _RUN_CHECKS_SQL)
    if checks.height == 0:
        return pl.DataFrame(
            schema={
                "agent": pl.Utf8,
                "stage": pl.Utf8,
                "n_pass": pl.Int64,
                "n_runs": pl.Int64,
                "share": pl.Float64,
            }
        )
    checks = checks.with_columns(
        pl.when(pl.col("model").fill_null("") == "")
        .then(pl.col("agent"))
        .otherwise(pl.col("agent") + " (" + pl.col("model") + ")")
        .alias("agent")
    )
    conjunctions = [
        pl.col("m"),
        pl.col("m") & pl.col("c"),
        pl.col("m") & pl.col("c") & pl.col("d"),
        pl.col("m") & pl.col("c") & pl.col("d") & pl.col("i"),
        pl.col("m") & pl.col("c") & pl.col("d") & pl.col("i") & pl.col("e"),
    ]
    frames = [
        checks.group_by("agent").agg(
            pl.lit(stage).alias("stage"),
            expr.sum().cast(pl.Int64).alias("n_pass"),
            pl.len().cast(pl.Int64).alias("n_runs"),
        )
        for stage, expr in zip(STAGES, conjunctions, strict=True)
    ]
    out = pl.concat(frames).with_columns((pl.col("n_pass") / pl.col("n_runs")).alias("share"))
    order = {s: k for k, s in enumerate(STAGES)}
    return (
        out.with_columns(pl.col("stage").replace_strict(order, return_dtype=pl.Int64).alias("_k"))
        .sort("agent", "_k")
        .drop("_k")
    )

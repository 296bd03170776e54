"""The conjunctive-score funnel (EXP-Bench): the share of runs that pass the monitor (M), then also the
conclusion (C), design (D), implementation (I) judges and the execution validator (E), cumulatively.

It is computed from the very per-run phase results `failatlas bench report` uses
(`failatlas.bench_core.scoring.metrics.run_scores`), so its last stage is the report's M·C·D·I·E: a phase that
was not scored (its judge did not run or failed, the validator had nothing to compare) is missing, never a
failure; a stage counts the runs where every phase up to it was scored (`n_runs`) and reports the runs left
out beside it (`n_unscored`)."""

from __future__ import annotations

import polars as pl

from failatlas.bench_core.agent_order import sort_groups
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.core.store import Store

STAGES = ("M", "M·C", "M·C·D", "M·C·D·I", "M·C·D·I·E")
_PHASES_OF = {stage: stage.split("·") for stage in STAGES}

_SCHEMA = {
    "agent": pl.Utf8,
    "stage": pl.Utf8,
    "n_pass": pl.Int64,
    "n_runs": pl.Int64,
    "n_unscored": pl.Int64,
    "share": pl.Float64,
}


def funnel(store: Store, *, scores: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per agent ('agent (model)') and funnel stage: `n_runs` scored on every phase up to the stage, `n_pass`
    of them passing all those phases, `n_unscored` runs left out, and `share` = n_pass / n_runs (NaN when no
    run is scored there). Runs that ended in an infrastructure error or were never scored are left out, as in
    `bench report`. Empty when the store has no scored run. `scores`: `run_scores(store)`, when the caller has it."""
    scores = run_scores(store) if scores is None else scores
    if scores.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    scores = scores.with_columns(
        pl.when(pl.col("model").fill_null("") == "")
        .then(pl.col("agent"))
        .otherwise(pl.col("agent") + " (" + pl.col("model") + ")")
        .alias("agent")
    )
    frames = []
    for k, stage in enumerate(STAGES):
        phases = _PHASES_OF[stage]
        scored = pl.all_horizontal([pl.col(p).is_not_null() for p in phases])
        passed = scored & pl.all_horizontal([pl.col(p).fill_null(0) == 1 for p in phases])
        frames.append(
            scores.group_by("agent").agg(
                pl.lit(stage).alias("stage"),
                pl.lit(k).alias("_k"),
                passed.sum().cast(pl.Int64).alias("n_pass"),
                scored.sum().cast(pl.Int64).alias("n_runs"),
                (~scored).sum().cast(pl.Int64).alias("n_unscored"),
            )
        )
    out = pl.concat(frames).with_columns(
        pl.when(pl.col("n_runs") > 0).then(pl.col("n_pass") / pl.col("n_runs")).otherwise(float("nan")).alias("share")
    )
    return sort_groups(out, ["agent", "_k"]).select(list(_SCHEMA))

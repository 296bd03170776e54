"""Phase scores, conjunctive scores, pass@k and pass^k, with Wilson score intervals.

Definitions (also in docs/metrics.md):
- Per run, each phase is 1 (passed), 0 (failed) or missing (not applicable to the task, judge not run, judge failed).
  M = no monitor finding of severity `fail`. D = design judge passed (score >= threshold). I = implementation judge
  passed (all hidden tests, or the LLM judge's verdict). E = validator outcome `passed`, missing when the outcome is
  `not_scored` (the re-run had nothing to compare with, or its prose outcome awaits a judge that did not run),
  and missing on every run of a task whose gold re-run shows this environment cannot run it (a missing package,
  GPU or dataset: not the agent's failure), counted apart in `E_env_n` with the reason in `E_unscored`
  (`environment.py`).
  C = conclusion judge passed.
  When several judges score one phase, the verdict that ranks higher counts (`judge_precedence`: a deterministic
  check, the hidden tests, over an `llm` judge over an `offline` heuristic; `judgements.kind`, `judgements.judge`);
  where two deterministic checks score one phase (hand-written and derived hidden tests), it passes only if both
  do; a verdict that failed on evidence (`judges.VETO`: a conclusion's number its re-run contradicts) ranks as one.
- A conjunctive score is 1 when all its phases are 1; it is computed over the runs where all its phases are scored
  (its denominator), and the number of runs left out is reported beside it.
- A failed monitor (M = 0) zeroes every score that includes M, as in EXP-Bench.
- pass@k (unbiased, Chen et al. 2021): per task with n attempts and c successes, 1 - C(n-c, k) / C(n, k); pass^k:
  C(c, k) / C(n, k), the chance that k attempts all succeed; both averaged over tasks with n >= k.
- Confidence intervals (95%): Wilson's score interval of the mean (`failatlas.core.intervals.wilson`), with n the
  tasks the group scored (the attempts of one task are not independent evidence about other tasks), or, in a group
  of a single task, its scored runs (its attempts are then the sample). With one run per task, n is the runs.
"""

from __future__ import annotations

from math import comb

import numpy as np
import polars as pl

from failatlas.bench_core.agent_order import sort_groups
from failatlas.bench_core.scoring.checks.base import DETERMINISTIC_RANK, VETO, judge_precedence
from failatlas.bench_core.scoring.environment import NO_REFERENCE_COMMAND, environment_blocks
from failatlas.bench_core.scoring.records import UNSCORED_OUTCOMES
from failatlas.bench_core.tasks.twins import REAL_TASK_SQL
from failatlas.core.intervals import wilson
from failatlas.core.store import Store

PHASES = ("M", "D", "I", "E", "C")
CONJUNCTIVE = {
    "I·E": ("I", "E"),
    "C·D": ("C", "D"),
    "All✓": ("D", "I", "C"),
    "All·E✓": ("D", "I", "C", "E"),
    "M·C·D·I·E": ("M", "C", "D", "I", "E"),
}
PHASE_OF = {"design": "D", "implementation": "I", "conclusion": "C"}


_RUNS = f"""
    SELECT r.id AS run_id, r.task_id, r.agent, r.model, r.attempt, r.benchmark, r.fault_injected, r.setting,
           t.paper_id, t.kind, json_array_length(t.spec, '$.masking.functions') AS n_masked, v.outcome,
           CASE WHEN r.agent = 'gold' THEN coalesce(v.stdout_tail, '') || '\n' || coalesce(v.stderr_tail, '')
                ELSE '' END AS output  -- only the reference's re-run says whether the environment can run a task
    FROM runs r LEFT JOIN validations v ON v.run_id = r.id LEFT JOIN tasks t ON t.id = r.task_id
    WHERE r.status != 'infra_error' AND {REAL_TASK_SQL}"""  # impossible twins are in no score (tasks/twins.py)
SCORE_SCHEMA = {"run_id": pl.Utf8, "task_id": pl.Utf8, "agent": pl.Utf8, "model": pl.Utf8, "attempt": pl.Int64,
                "benchmark": pl.Utf8, "fault_injected": pl.Utf8, "setting": pl.Utf8, "paper_id": pl.Utf8,
                "kind": pl.Utf8, "n_masked": pl.Int64, "outcome": pl.Utf8, "E_unscored": pl.Utf8,
                **{k: pl.Int64 for k in (*PHASES, *CONJUNCTIVE)}}


def run_scores(store: Store, *, environment: bool = True) -> pl.DataFrame:
    """One row per scored run: identifiers (with the task's paper, kind, setting and number of masked functions
    `n_masked`) and the 0/1/null value of every phase and conjunctive score.

    `environment`: leave E unscored (null, the reason in `E_unscored`) on the tasks this environment cannot run,
    by the evidence of their gold runs (`environment.environment_blocks`), and on gold runs with no reference
    command to run. `tasks validate` reads the runs as they are (False)."""
    runs = store.query_polars(_RUNS)
    judgements = store.query_polars(
        "SELECT run_id, phase, judge, kind, status, passed, coalesce(passed = false AND"
        f" json_extract(verdict, '$.{VETO}')::BOOLEAN, false) AS veto FROM judgements WHERE status = 'ok'")
    monitor = store.query_polars(
        "SELECT run_id, bool_or(severity = 'fail') AS failed FROM monitor_findings GROUP BY run_id")
    scored_ids = set(judgements["run_id"].to_list()) | set(
        store.query_polars("SELECT run_id FROM validations")["run_id"].to_list())
    blocked = environment_blocks([r for r in runs.iter_rows(named=True) if r["agent"] == "gold"]) \
        if environment else {}
    rows = []
    verdicts: dict[tuple[str, str], tuple[bool, int]] = {}
    for r in judgements.iter_rows(named=True):
        phase = PHASE_OF.get(r["phase"])
        if phase is None:
            continue
        rank = DETERMINISTIC_RANK if r["veto"] else judge_precedence(r["kind"], r["judge"])
        key = (r["run_id"], phase)
        if key not in verdicts or rank > verdicts[key][1]:
            verdicts[key] = (bool(r["passed"]), rank)
        elif rank == verdicts[key][1] == DETERMINISTIC_RANK:  # two deterministic checks (hidden, derived): both
            verdicts[key] = (verdicts[key][0] and bool(r["passed"]), rank)
    monitor_failed = dict(zip(monitor["run_id"].to_list(), monitor["failed"].to_list(), strict=True))
    for r in runs.iter_rows(named=True):
        if r["run_id"] not in scored_ids:
            continue
        row = {k: r[k] for k in SCORE_SCHEMA if k in r and k != "output"}
        row["M"] = 0 if monitor_failed.get(r["run_id"]) else 1
        row["E"] = None if r["outcome"] in (None, *UNSCORED_OUTCOMES) else int(r["outcome"] == "passed")
        row["E_unscored"] = None
        if environment and r["outcome"] is not None:
            if r["task_id"] in blocked:
                row["E_unscored"] = blocked[r["task_id"]]
            elif r["agent"] == "gold" and r["outcome"] == "not_run":
                row["E_unscored"] = NO_REFERENCE_COMMAND
            if row["E_unscored"] is not None:
                row["E"] = None
        for phase in ("D", "I", "C"):
            v = verdicts.get((r["run_id"], phase))
            row[phase] = None if v is None else int(v[0])
        for name, parts in CONJUNCTIVE.items():
            values = [row[p] for p in parts]
            row[name] = None if any(v is None for v in values) else int(all(values))
        rows.append(row)
    return pl.DataFrame(rows, schema=SCORE_SCHEMA)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} attempts, got {n}")
    return 1.0 if n - c < k else 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k for one task: the chance that k attempts drawn without replacement all succeed."""
    if n < k:
        raise ValueError(f"pass^{k} needs at least {k} attempts, got {n}")
    return comb(c, k) / comb(n, k)


def score_interval(values: pl.Series, tasks: pl.Series) -> tuple[float, float]:
    """The 95% interval of the mean of 0/1 run `values` (nulls dropped) whose runs belong to `tasks`: Wilson's
    score interval with n the distinct tasks, or the runs when they are all of one task; (nan, nan) for none."""
    scored = values.is_not_null()
    runs = int(scored.sum())
    if runs == 0:
        return (float("nan"), float("nan"))
    n_tasks = tasks.filter(scored).n_unique()
    n = runs if n_tasks == 1 else n_tasks
    low, high = wilson(float(values.mean()) * n, n)
    return float(low), float(high)


def summarise(scores: pl.DataFrame, by: list[str], *, k: int | None = None) -> pl.DataFrame:
    """Mean, 95% CI (`score_interval`), scored and unscored counts of every phase and conjunctive score per group,
    the groups sorted by `by` (agents in report order: `agent_order`). Raises ValueError when `k` is below 1."""
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1 attempt for pass@k, got {k}")
    out = []
    groups = scores.group_by(by, maintain_order=True) if by else [((), scores)]
    for key, group in groups:
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=False))
        row["runs"] = group.height
        row["tasks"] = group["task_id"].n_unique()
        row["E_env_n"] = group["E_unscored"].is_not_null().sum() if "E_unscored" in group.columns else 0
        for metric in (*PHASES, *CONJUNCTIVE):
            n = int(group[metric].is_not_null().sum())
            row[metric] = float(group[metric].mean()) if n else float("nan")
            row[f"{metric}_lo"], row[f"{metric}_hi"] = score_interval(group[metric], group["task_id"])
            row[f"{metric}_n"] = n
        if k:
            per_task = group.filter(pl.col("M·C·D·I·E").is_not_null()).group_by("task_id").agg(
                pl.len().alias("n"), pl.col("M·C·D·I·E").sum().alias("c"))
            eligible = [(r["n"], r["c"]) for r in per_task.iter_rows(named=True) if r["n"] >= k]
            row[f"pass@{k}"] = float(np.mean([pass_at_k(n, c, k) for n, c in eligible])) if eligible else None
            row[f"pass^{k}"] = float(np.mean([pass_hat_k(n, c, k) for n, c in eligible])) if eligible else None
        out.append(row)
    return sort_groups(pl.DataFrame(out), by)

"""The runs stage: agents on tasks in sandboxes, each run stored once (tables in `schema.py`, writes in
`writes.py`). `run(store, BenchParams) -> BenchResult` is the stage; `plan` + `run_batch` its building blocks."""

from failatlas.bench_core.runs.api import (
    BenchParams,
    BenchResult,
    check_data,
    get_run,
    list_runs,
    run,
    runs_dir_for,
    select_tasks,
    total_runs,
)
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.inputs import RepoUsed, ResourceOverrides, RunInputs
from failatlas.bench_core.runs.runner import BatchReport, Plan, plan, run_batch

__all__ = ["BatchReport", "BenchParams", "BenchResult", "Plan", "RepoUsed", "ResourceOverrides", "RunConfig",
           "RunInputs", "check_data", "get_run", "list_runs", "plan", "run", "run_batch", "runs_dir_for",
           "select_tasks", "total_runs"]

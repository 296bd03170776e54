"""The runs stage, `run(store, BenchParams) -> BenchResult` (behind `failatlas bench run`); reads of stored runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from failatlas.bench_core.agents.base import Budget, create_agent
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.model import RunRecord
from failatlas.bench_core.runs.runner import plan_runs, run_batch
from failatlas.bench_core.tasks.catalog import get_task, list_tasks
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import ConfigError, NotFoundError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store


def select_tasks(store: Store, *, task_ids: list[str] | None = None, benchmark: str | None = None,
                 kind: str | None = None, include_gpu: bool = True) -> list[TaskSpec]:
    """Tasks from the catalog by id or filter; raises when nothing matches."""
    if task_ids:
        tasks = [get_task(store, tid) for tid in task_ids]
    else:
        tasks = [get_task(store, row["id"]) for row in list_tasks(store, benchmark=benchmark, kind=kind)]
    if not include_gpu:
        tasks = [t for t in tasks if t.resources.gpus == 0]
    if not tasks:
        raise NotFoundError("no task matches", hint="import tasks first (`failatlas tasks import-mini`) "
                            "or check the filters")
    return tasks


class BenchParams(BaseModel):
    """What `failatlas bench run` does: which agent on which tasks, how often, where. Recorded with the stage run."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    agent_params: dict[str, Any] = Field(default_factory=dict)
    model: str = ""
    task_ids: list[str] | None = None
    benchmark: str | None = None
    kind: str | None = None
    gpu_tasks: bool = False
    attempts: int = 1
    workers: int = 1
    sandbox: str = "docker"
    executor: str = "local"
    retry_infra: bool = False
    budget: Budget = Field(default_factory=Budget)
    image: str | None = None
    repo: Path | None = None
    runs_dir: Path | None = None


class BenchResult(BaseModel):
    """What one `run` did: runs executed now (by status), runs skipped because they were stored already."""

    planned: int
    skipped: int
    by_status: dict[str, int]
    run_ids: list[str]
    stage_run_id: str


def _tasks(store: Store, params: BenchParams) -> list[TaskSpec]:
    # tasks named by id always run; a filter includes tasks that need GPUs only with `gpu_tasks`
    return select_tasks(store, task_ids=params.task_ids, benchmark=params.benchmark, kind=params.kind,
                        include_gpu=params.gpu_tasks or bool(params.task_ids))


def total_runs(store: Store, params: BenchParams) -> int:
    """How many runs `params` names (stored ones included): a progress bar's total."""
    return len(_tasks(store, params)) * max(params.attempts, 0)


def runs_dir_for(store: Store, runs_dir: Path | None) -> Path:
    """Where run workspaces live: `runs_dir`, else `runs/` beside the store."""
    return (runs_dir or store.path.resolve().parent / "runs").resolve()


def run(store: Store, params: BenchParams, *, on_done: Callable[[RunRecord], None] | None = None) -> BenchResult:
    """Run `params.agent` on the selected tasks (`attempts` each), doing only the runs not stored yet; each run
    is stored in one transaction as it finishes, so an interrupted call is resumed by calling again. Records one
    `stage_runs` row (stage `bench.run`). Raises ConfigError for bad parameters or an unknown agent, NotFoundError
    when no task matches."""
    with stage_run(store, "bench.run", params) as record:
        if params.attempts < 1:
            raise ConfigError("--attempts must be at least 1")
        create_agent(params.agent, **params.agent_params)  # fail fast on an unknown agent or bad parameters
        tasks = _tasks(store, params)
        work, skipped = plan_runs(store, tasks, params.agent, model=params.model, attempts=params.attempts,
                                  agent_params=params.agent_params, retry_infra=params.retry_infra)
        config = RunConfig(runs_dir=runs_dir_for(store, params.runs_dir), sandbox=params.sandbox, image=params.image,
                           repo=params.repo, budget=params.budget)
        report = run_batch(store, work, config, workers=params.workers, executor=params.executor, on_done=on_done)
        for table, n in report.rows.items():
            record.count(table, n)
        record.note(tasks=len(tasks), planned=report.planned, skipped=skipped, by_status=report.by_status)
    return BenchResult(planned=report.planned, skipped=skipped, by_status=report.by_status, run_ids=report.run_ids,
                       stage_run_id=record.id)


def list_runs(store: Store, *, agent: str | None = None, task_id: str | None = None) -> list[dict[str, Any]]:
    clauses, params = [], []
    if agent:
        clauses.append("agent = ?")
        params.append(agent)
    if task_id:
        clauses.append("task_id = ?")
        params.append(task_id)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    return store.query_dicts(
        f"SELECT id, task_id, agent, model, attempt, status, fault_injected, round(duration_s, 1) AS seconds,"
        f" infra_error FROM runs {where} ORDER BY task_id, agent, attempt", params)


def get_run(store: Store, run_id: str) -> dict[str, Any]:
    rows = store.query_dicts("SELECT * FROM runs WHERE id = ?", [run_id])
    if not rows:
        raise NotFoundError(f"no run '{run_id}'", hint="list runs with `failatlas bench list`")
    run = rows[0]
    run["steps"] = store.query_dicts("SELECT * FROM run_steps WHERE run_id = ? ORDER BY seq", [run_id])
    run["commands"] = store.query_dicts(
        "SELECT * FROM sandbox_commands WHERE run_id = ? ORDER BY purpose, seq", [run_id])
    return run

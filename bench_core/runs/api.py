"""`run_benchmark`: the function behind `failatlas bench run`; and reads of stored runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from failatlas.bench_core.agents.base import Budget, create_agent
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.model import RunRecord
from failatlas.bench_core.runs.runner import BatchReport, plan_runs, run_batch
from failatlas.bench_core.tasks.catalog import get_task, list_tasks
from failatlas.bench_core.tasks.model import TaskSpec

from failatlas.core.errors import ConfigError, NotFoundError
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


def run_benchmark(
    store: Store,
    tasks: list[TaskSpec],
    agent: str,
    *,
    runs_dir: Path,
    model: str = "",
    attempts: int = 1,
    workers: int = 1,
    sandbox: str = "docker",
    executor: str = "local",
    agent_params: dict[str, Any] | None = None,
    retry_infra: bool = False,
    budget: Budget | None = None,
    image: str | None = None,
    repo: Path | None = None,
    on_done: Callable[[RunRecord], None] | None = None,
) -> BatchReport:
    """Run `agent` on `tasks` (`attempts` each), doing only the runs not stored yet."""
    if attempts < 1:
        raise ConfigError("--attempts must be at least 1")
    create_agent(agent, **(agent_params or {}))  # fail fast on an unknown agent or bad parameters
    work, skipped = plan_runs(store, tasks, agent, model=model, attempts=attempts, agent_params=agent_params,
                              retry_infra=retry_infra)
    config = RunConfig(runs_dir=runs_dir.resolve(), sandbox=sandbox, image=image, repo=repo,
                       budget=budget or Budget())
    report = run_batch(store, work, config, workers=workers, executor=executor, on_done=on_done)
    report.skipped = skipped
    return report


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

"""The runs stage, `run(store, BenchParams) -> BenchResult` (behind `failatlas bench run`); reads of stored runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from failatlas.bench_core.agent_order import agent_order_sql
from failatlas.bench_core.agents.base import Budget, create_agent
from failatlas.bench_core.repos import repository_for
from failatlas.bench_core.runs.data import DataInput, check_outside, fingerprints, task_data, valued_on_problem
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.executors import host_gpus
from failatlas.bench_core.runs.inputs import RepoUsed, ResourceOverrides, repository_of, unavailable
from failatlas.bench_core.runs.model import RunRecord
from failatlas.bench_core.runs.runner import Plan, plan, run_batch
from failatlas.bench_core.runs.twins import impossible_twins
from failatlas.bench_core.sandbox.model import CopyLimits
from failatlas.bench_core.sandbox.venvs import env_root
from failatlas.bench_core.tasks.catalog import get_task, list_tasks, no_match_hint
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import ConfigError, NotFoundError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store


def select_tasks(store: Store, *, task_ids: list[str] | None = None, benchmark: str | None = None,
                 kind: str | None = None, include_gpu: bool = True, papers: list[str] | None = None,
                 masked: int | None = None) -> list[TaskSpec]:
    """Tasks from the catalog by id, or by filter (benchmark, kind, any of `papers`, `masked`: the number of
    masked functions); raises NotFoundError when nothing matches."""
    if task_ids:
        tasks = [get_task(store, tid) for tid in task_ids]
    else:
        rows = list_tasks(store, benchmark=benchmark, kind=kind, paper=papers or None, masked=masked)
        tasks = [get_task(store, row["id"]) for row in rows]
    if not include_gpu:
        tasks = [t for t in tasks if t.resources.gpus == 0]
    if not tasks:
        raise NotFoundError("no task matches", hint=no_match_hint(store, paper=papers or None))
    return tasks


class BenchParams(BaseModel):
    """What `failatlas bench run` does: which agent on which tasks, how often, where. Recorded with the stage run.

    `repo`: the checkout every selected task is prepared from (default: each task's cached repository, else its
    bundled one). `resources` override the tasks' declared GPUs, memory and time limit. `gpu_tasks`: run a task
    that needs more GPUs than this host has anyway, with none visible (default: it is not run, with the reason).
    `setting`: the task setting the agent is given (part of the run's key; default: each task's first)."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    agent_params: dict[str, Any] = Field(default_factory=dict)
    model: str = ""
    task_ids: list[str] | None = None
    benchmark: str | None = None
    kind: str | None = None
    papers: list[str] | None = None
    masked: int | None = None  # the number of masked functions (AutoExperiment's n)
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
    impossible: bool = False  # run the selected tasks' impossible twins instead (runs/twins.py, docs/metrics.md)
    resources: ResourceOverrides = Field(default_factory=ResourceOverrides)
    setting: str | None = None
    # `network` replaces each task's policy (none | registries | full; None keeps the task's); `allow_hosts` are
    # hosts `registries` allows beyond this host's package indexes; `ca_bundle` is given to sandboxes with network
    # (None: the one pip/requests on this host use; "none": no bundle)
    network: str | None = None
    allow_hosts: list[str] = Field(default_factory=list)
    ca_bundle: str | None = None
    # `data`: name -> host path, mounted read-only at /data/NAME in every selected task's sandboxes and re-runs,
    # over the tasks' own `data:` (runs/data.py); `max_copy_mib`: the cap on the working copy copied out of the
    # sandbox (None: CopyLimits' default)
    data: dict[str, Path] = Field(default_factory=dict)
    max_copy_mib: int | None = Field(default=None, ge=1)


class BenchResult(BaseModel):
    """What one `run` did: runs executed now (by status), runs skipped because they were stored already.

    `not_run`: "task: reason" for each task not run because an input is missing (its repository, GPUs this host
    lacks); nothing is stored for it. `infra_errors`: "task · agent: reason" for each run that ended in
    `infra_error` now; `kept_infra` the same for stored ones skipped because their inputs did not change (redo
    them with `retry_infra`); `redone`: stored `infra_error` runs done again because their inputs changed."""

    planned: int
    skipped: int
    by_status: dict[str, int]
    run_ids: list[str]
    stage_run_id: str
    not_run: list[str] = Field(default_factory=list)
    infra_errors: list[str] = Field(default_factory=list)
    kept_infra: list[str] = Field(default_factory=list)
    task_runs: dict[str, list[str]] = Field(default_factory=dict, description=(
        "task id -> the ids of the runs this call names, stored ones included (a run's id holds its sandbox: "
        "RunRequest.sandbox)"))
    redone: int = 0


def _tasks(store: Store, params: BenchParams, notes: list[str] | None = None) -> list[TaskSpec]:
    """The selected tasks (their impossible twins with `params.impossible`, "task: reason" in `notes` for each
    without one) with the resource overrides applied (tasks needing GPUs included: `run` says per task why one the
    host cannot serve is not run)."""
    tasks = select_tasks(store, task_ids=params.task_ids, benchmark=params.benchmark, kind=params.kind,
                         papers=params.papers, masked=params.masked)
    if params.impossible:
        if params.repo is not None:
            raise ConfigError("--impossible runs each twin from its own folder; leave --repo out",
                              hint="add the checkout to the repository cache (`failatlas repos add`) instead")
        tasks, skipped = impossible_twins(store, tasks)
        (notes if notes is not None else []).extend(skipped)
    return [params.resources.apply(task) for task in tasks]


def _check_setting(tasks: list[TaskSpec], setting: str | None) -> None:
    """ConfigError naming each task that lacks `setting`, with the settings it has."""
    if setting is None:
        return
    unknown = []
    for task in tasks:
        try:
            task.setting(setting)
        except ValueError as exc:
            unknown.append(str(exc))
    if unknown:
        more = f" (and {len(unknown) - 3} more task(s))" if len(unknown) > 3 else ""
        raise ConfigError("; ".join(unknown[:3]) + more, hint="choose one of the task's settings, or leave "
                          "--setting out for each task's default")


class _Inputs(BaseModel):
    """What `_inputs` resolved: the tasks that can run here, each one's repository and data inputs, and
    "task: reason" for each task that cannot run."""

    runnable: list[TaskSpec] = Field(default_factory=list)
    repos: dict[str, RepoUsed] = Field(default_factory=dict)
    data: dict[str, dict[str, DataInput]] = Field(default_factory=dict)
    not_run: list[str] = Field(default_factory=list)


def _inputs(store: Store, tasks: list[TaskSpec], params: BenchParams) -> _Inputs:
    """The tasks that can run here, each one's repository (`params.repo`, else the repository cache's checkout,
    else the bundled folder) and data inputs (`params.data` over the task's own)."""
    gpus = host_gpus(params.executor)
    given = repository_of(tasks[0], repo=params.repo) if params.repo is not None and tasks else None
    out, walked = _Inputs(), {}
    for task in tasks:
        if gpus is not None and task.resources.gpus > gpus and not params.gpu_tasks:
            out.not_run.append(f"{task.id}: needs {task.resources.gpus} GPU(s), this host has {gpus}")
            continue
        repo = given or repository_of(task, cached=repository_for(store, task))
        if repo is None:
            out.not_run.append(f"{task.id}: {unavailable(task)}")
            continue
        data, missing = task_data(task, params.data)
        if missing:
            out.not_run.append(f"{task.id}: {missing}")
            continue
        found = fingerprints(data, walked)
        problem = valued_on_problem(task, found)
        if problem:
            out.not_run.append(f"{task.id}: {problem}")
            continue
        out.runnable.append(task)
        out.repos[task.id] = repo
        out.data[task.id] = found
    return out


def check_data(store: Store, data: dict[str, Path], runs_dir: Path | None, *, field: str = "--data") -> None:
    """ConfigError naming `field` when a data path is the store or lies inside or holds the runs' workspaces, the
    repository cache or the store itself."""
    from failatlas.bench_core.repos.cache import default_cache_dir

    check_outside(data, {"the store": store.path, "the runs' workspaces": runs_dir_for(store, runs_dir),
                         "the repository cache": default_cache_dir(store)}, field=field)


def copy_limits(max_copy_mib: int | None) -> CopyLimits:
    """The copy-out limits of a run's working copy, with `max_copy_mib` as the cap on its bytes in all."""
    if max_copy_mib is None:
        return CopyLimits()
    return CopyLimits(max_total_bytes=max_copy_mib * 1024 * 1024)


def network_config(network: str | None, allow_hosts: list[str], ca_bundle: str | None) -> dict[str, Any]:
    """The network fields of a RunConfig: the policy override, this host's package indexes plus `allow_hosts`, the
    CA bundle (`ca_bundle`, else this host's default; "none" for none) and the host's upstream proxy. Raises
    ConfigError for an unknown policy, a host that is not a host name or an unreadable bundle."""
    from failatlas.bench_core.sandbox import policy

    if network is not None:
        try:
            network = policy.as_policy(network)
        except ValueError as exc:
            raise ConfigError(f"--network: {exc}") from exc
    path = None if (ca_bundle or "").lower() == "none" else (ca_bundle or policy.default_ca_bundle())
    return {"network": network, "registry_hosts": policy.registry_hosts(allow_hosts),
            "ca_bundle": policy.ca_bundle(path), "upstream_proxy": policy.upstream_proxy()}


def total_runs(store: Store, params: BenchParams) -> int:
    """How many runs `params` names (stored ones included): a progress bar's total."""
    return len(_tasks(store, params)) * max(params.attempts, 0)


def runs_dir_for(store: Store, runs_dir: Path | None) -> Path:
    """Where run workspaces live: `runs_dir`, else `runs/` beside the store."""
    return (runs_dir or store.path.resolve().parent / "runs").resolve()


def run(store: Store, params: BenchParams, *, on_done: Callable[[RunRecord], None] | None = None,
        agents: Sequence[str] | None = None) -> BenchResult:
    """Run `params.agent` on the selected tasks (`attempts` each), doing only the runs not stored yet (and stored
    `infra_error` runs whose inputs changed); each run is stored in one transaction as it finishes, so an
    interrupted call is resumed by calling again. A task whose repository or GPUs are missing is not run, with
    its reason in `not_run`, and the batch goes on. Records one `stage_runs` row (stage `bench.run`). Raises
    ConfigError for bad parameters, an unknown agent or a setting a task lacks (before anything runs),
    NotFoundError when no task matches.

    `agents`: run each of these agents (instead of `params.agent` alone) with the same parameters, in one batch:
    the workers go from one agent's runs to the next without waiting for the slowest run of each."""
    names = list(dict.fromkeys(agents)) if agents else [params.agent]
    with store.kept(), stage_run(store, "bench.run", params) as record:  # one write per run: the file kept open
        if params.attempts < 1:
            raise ConfigError("--attempts must be at least 1")
        for name in names:  # fail fast on an unknown agent or bad parameters
            create_agent(name, **params.agent_params)
        twin_notes: list[str] = []
        tasks = _tasks(store, params, twin_notes)
        _check_setting(tasks, params.setting)
        check_data(store, params.data, params.runs_dir)
        found = _inputs(store, tasks, params)
        runnable, not_run = found.runnable, twin_notes + found.not_run
        config = RunConfig(runs_dir=runs_dir_for(store, params.runs_dir), sandbox=params.sandbox, image=params.image,
                           repo=params.repo, budget=params.budget, repos=found.repos, data=found.data,
                           overrides=params.resources, run_without_gpus=params.gpu_tasks,
                           copy_limits=copy_limits(params.max_copy_mib), env_root=env_root(store.path),
                           **network_config(params.network, params.allow_hosts, params.ca_bundle))
        todo = Plan()
        for name in names:
            one = plan(store, runnable, name, model=params.model, attempts=params.attempts,
                       agent_params=params.agent_params, retry_infra=params.retry_infra, setting=params.setting,
                       config=config)
            todo.todo += one.todo
            todo.skipped += one.skipped
            todo.redone += one.redone
            todo.kept_infra += one.kept_infra
            for task_id, ids in one.run_ids.items():
                todo.run_ids.setdefault(task_id, []).extend(ids)
        report = run_batch(store, todo.todo, config, workers=params.workers, executor=params.executor,
                           on_done=on_done)
        for table, n in report.rows.items():
            record.count(table, n)
        record.note(tasks=len(tasks), planned=report.planned, skipped=todo.skipped, by_status=report.by_status,
                    redone=todo.redone, not_run=not_run, infra_errors=report.infra_errors,
                    **({"agents": names} if agents else {}))
    return BenchResult(planned=report.planned, skipped=todo.skipped, by_status=report.by_status,
                       run_ids=report.run_ids, stage_run_id=record.id, not_run=not_run,
                       infra_errors=report.infra_errors, kept_infra=todo.kept_infra, redone=todo.redone,
                       task_runs=todo.run_ids)


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
        f"SELECT id, task_id, agent, model, attempt, setting, status, fault_injected,"
        f" round(duration_s, 1) AS seconds, infra_error, repo_commit FROM runs {where}"
        f" ORDER BY task_id, {agent_order_sql('agent')}, attempt", params)  # agents in report order


def get_run(store: Store, run_id: str) -> dict[str, Any]:
    rows = store.query_dicts("SELECT * FROM runs WHERE id = ?", [run_id])
    if not rows:
        raise NotFoundError(f"no run '{run_id}'", hint="list runs with `failatlas bench list`")
    run = rows[0]
    run["steps"] = store.query_dicts("SELECT * FROM run_steps WHERE run_id = ? ORDER BY seq", [run_id])
    run["commands"] = store.query_dicts(
        "SELECT * FROM sandbox_commands WHERE run_id = ? ORDER BY purpose, seq", [run_id])
    return run

"""The runner: plan the runs that are missing, execute them on an executor, store each one as it finishes.

Resumability: a run is stored in one transaction when it ends (run row, steps, sandbox commands together), keyed by
its stable id. A run killed midway left nothing, so re-running the same command redoes exactly the missing runs,
and a run is never stored twice. Infrastructure failures are stored with status `infra_error`, never counted as the
agent's failure, and redone when their inputs changed (another repository commit, image, sandbox kind, resources or
budget: `RunInputs.fingerprint`) or on request (`retry_infra`). A completed run is never redone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from failatlas.bench_core.runs.execute import RunConfig, run_inputs
from failatlas.bench_core.runs.model import RunRecord, RunRequest
from failatlas.bench_core.runs.writes import write_run
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InfrastructureError
from failatlas.core.store import Store


@dataclass
class BatchReport:
    planned: int = 0
    skipped: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    infra_errors: list[str] = field(default_factory=list)  # "task · agent: reason" of each run ending so now


def existing_runs(store: Store) -> dict[str, str]:
    """run id -> status of every stored run."""
    return dict(store.query("SELECT id, status FROM runs"))


@dataclass
class Plan:
    """What a batch will do: `todo` (request, task) pairs; `skipped` runs stored already; of the stored
    `infra_error` runs, `redone` were planned again because their inputs changed and `kept_infra` (one line
    each: task, agent, reason) were skipped because they did not."""

    todo: list[tuple[RunRequest, TaskSpec]] = field(default_factory=list)
    skipped: int = 0
    redone: int = 0
    kept_infra: list[str] = field(default_factory=list)


def plan(
    store: Store,
    tasks: Iterable[TaskSpec],
    agent: str,
    *,
    model: str = "",
    attempts: int = 1,
    agent_params: dict | None = None,
    retry_infra: bool = False,
    setting: str | None = None,
    config: RunConfig | None = None,
) -> Plan:
    """The runs still to do. A stored run is skipped, except an `infra_error` one with `retry_infra`, or whose
    inputs (computed with `config`; without it, never compared) differ from what a run would use now."""
    stored = {row[0]: row[1:] for row in store.query("SELECT id, status, inputs_hash, infra_error FROM runs")}
    out = Plan()
    for task in tasks:
        fingerprint = run_inputs(config.overrides.apply(task), config).fingerprint if config else None
        for attempt in range(1, attempts + 1):
            request = RunRequest(task_id=task.id, agent=agent, agent_params=agent_params or {}, model=model,
                                 attempt=attempt, setting=setting)
            status, stored_hash, reason = stored.get(request.run_id, (None, None, None))
            if status == "infra_error" and not retry_infra and fingerprint is not None and stored_hash != fingerprint:
                out.redone += 1
            elif status is not None and not (retry_infra and status == "infra_error"):
                out.skipped += 1
                if status == "infra_error":
                    out.kept_infra.append(f"{task.id} · {agent}: {reason}")
                continue
            out.todo.append((request, task))
    return out


def run_batch(
    store: Store,
    work: list[tuple[RunRequest, TaskSpec]],
    config: RunConfig,
    *,
    workers: int = 1,
    executor: str = "local",
    on_done: Callable[[RunRecord], None] | None = None,
) -> BatchReport:
    """Execute `work` and store each run as soon as it finishes (the building block of `runs.run`, which also
    selects the tasks and records the stage run)."""
    from failatlas.bench_core.runs.executors import create_executor

    report = BatchReport(planned=len(work))
    if not work:
        return report
    from failatlas.bench_core.sandbox import sandbox_kind

    kind = sandbox_kind(config.sandbox)
    # with the engine unreachable each run records that itself, as infra_error (retryable with --retry-infra)
    with contextlib.suppress(InfrastructureError):
        kind.clean_orphans()  # sandboxes left by a runner that was killed
    with create_executor(executor, workers=workers) as pool:
        for record in pool.map_unordered(work, config):
            for table, n in write_run(store, record).items():
                report.rows[table] = report.rows.get(table, 0) + n
            report.by_status[record.status] = report.by_status.get(record.status, 0) + 1
            report.run_ids.append(record.request.run_id)
            if record.status == "infra_error":
                report.infra_errors.append(f"{record.request.task_id} · {record.request.agent}: {record.infra_error}")
            if on_done:
                on_done(record)
    return report

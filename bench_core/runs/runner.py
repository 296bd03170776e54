"""The runner: plan the runs that are missing, execute them on an executor, store each one as it finishes.

Resumability: a run is stored in one transaction when it ends (run row, steps, sandbox commands together), keyed by
its stable id. A run killed midway left nothing, so re-running the same command redoes exactly the missing runs,
and a run is never stored twice. Infrastructure failures are stored with status `infra_error` and are retried on
request (`retry_infra`), never counted as the agent's failure.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pyarrow as pa
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.model import RunRecord, RunRequest
from failatlas.bench_core.tasks.model import TaskSpec

from failatlas.core.errors import InfrastructureError
from failatlas.core.store import Store


@dataclass
class BatchReport:
    planned: int = 0
    skipped: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)


def existing_runs(store: Store) -> dict[str, str]:
    """run id -> status of every stored run."""
    return dict(store.query("SELECT id, status FROM runs"))


def plan_runs(
    store: Store,
    tasks: Iterable[TaskSpec],
    agent: str,
    *,
    model: str = "",
    attempts: int = 1,
    agent_params: dict | None = None,
    retry_infra: bool = False,
) -> tuple[list[tuple[RunRequest, TaskSpec]], int]:
    """The runs still to do, and how many were skipped because they are already stored."""
    done = existing_runs(store)
    todo, skipped = [], 0
    for task in tasks:
        for attempt in range(1, attempts + 1):
            request = RunRequest(task_id=task.id, agent=agent, agent_params=agent_params or {}, model=model,
                                 attempt=attempt)
            status = done.get(request.run_id)
            if status is not None and not (retry_infra and status == "infra_error"):
                skipped += 1
                continue
            todo.append((request, task))
    return todo, skipped


def write_run(store: Store, record: RunRecord) -> None:
    """Store one run (replacing any earlier record of the same id) in a single transaction."""
    r = record.request
    with store.write() as conn:
        for table, column in (("runs", "id"), ("run_steps", "run_id"), ("sandbox_commands", "run_id")):
            conn.execute(f"DELETE FROM {table} WHERE {column} = ?", [r.run_id])
        duration = (record.finished_at - record.started_at).total_seconds()
        outputs = record.outputs.model_dump(mode="json")
        if record.agent_error:
            outputs["agent_error"] = record.agent_error
        conn.execute(
            "INSERT INTO runs (id, task_id, agent, agent_params, model, attempt, benchmark, status, infra_error,"
            " fault_injected, sandbox, started_at, finished_at, duration_s, outputs, cost_usd, tokens)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [r.run_id, r.task_id, r.agent, json.dumps(r.agent_params, sort_keys=True), r.model, r.attempt,
             record.benchmark, record.status, record.infra_error, record.fault_injected, record.sandbox,
             record.started_at, record.finished_at, duration, json.dumps(outputs), record.cost_usd, record.tokens],
        )
        if record.steps:
            conn.executemany(
                "INSERT INTO run_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [[r.run_id, s.seq, s.kind, s.role, s.content, s.tool,
                  json.dumps(s.arguments) if s.arguments is not None else None, s.ts] for s in record.steps],
            )
        if record.commands:
            # one Arrow table, not executemany: DuckDB binds executemany row by row (under 1,000 rows/s)
            commands = _commands_table(r.run_id, record.commands)  # noqa: F841 - read by the INSERT below
            conn.execute("INSERT INTO sandbox_commands SELECT * FROM commands")


_COMMAND_COLUMNS = ("seq", "purpose", "command", "started_at", "duration_s", "exit_code", "timed_out",
                    "killed_reason", "output_truncated", "stdout_tail", "stderr_tail")


def _commands_table(run_id: str, commands: list) -> pa.Table:
    """The `sandbox_commands` rows of one run, columns in table order."""
    columns = {"run_id": pa.array([run_id] * len(commands), pa.string())}
    for name in _COMMAND_COLUMNS:
        columns[name] = pa.array([getattr(c, name) for c in commands])
    columns["seq"] = columns["seq"].cast(pa.int32())
    columns["exit_code"] = pa.array([c.exit_code for c in commands], pa.int32())
    return pa.table(columns)


def run_batch(
    store: Store,
    work: list[tuple[RunRequest, TaskSpec]],
    config: RunConfig,
    *,
    workers: int = 1,
    executor: str = "local",
    on_done: Callable[[RunRecord], None] | None = None,
) -> BatchReport:
    """Execute `work` and store each run as soon as it finishes."""
    from failatlas.bench_core.runs.executors import create_executor

    report = BatchReport(planned=len(work))
    if not work:
        return report
    if config.sandbox == "docker":
        from failatlas.bench_core.sandbox import cleanup_orphans

        # with the daemon unreachable each run records that itself, as infra_error (retryable with --retry-infra)
        with contextlib.suppress(InfrastructureError):
            cleanup_orphans()  # containers left by a runner that was killed
    with create_executor(executor, workers=workers) as pool:
        for record in pool.map_unordered(work, config):
            write_run(store, record)
            report.by_status[record.status] = report.by_status.get(record.status, 0) + 1
            report.run_ids.append(record.request.run_id)
            if on_done:
                on_done(record)
    return report

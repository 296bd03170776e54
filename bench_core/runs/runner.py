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

from failatlas.bench_core.runs.execute import RunConfig, run_inputs, run_place
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
    run_ids: dict[str, list[str]] = field(default_factory=dict)  # task id -> the ids of its runs, stored or to do
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
    model, agent_params = agent_model(agent, model, agent_params or {})
    out = Plan()
    for task in tasks:
        fingerprint = run_inputs(config.overrides.apply(task), config).fingerprint if config else None
        place = run_place(config.overrides.apply(task), config) if config else None
        for attempt in range(1, attempts + 1):
            request = RunRequest(task_id=task.id, agent=agent, agent_params=agent_params or {}, model=model,
                                 attempt=attempt, setting=setting, sandbox=place)
            out.run_ids.setdefault(task.id, []).append(request.run_id)
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


def _llm_role(agent: str) -> str | None:
    from failatlas.bench_core.agents import AGENTS

    try:
        return getattr(AGENTS.factory(agent), "llm_role", None)
    except Exception:  # noqa: BLE001 - an unknown agent is reported where it is created
        return None


def check_agent_endpoint(work: list[tuple[RunRequest, TaskSpec]]) -> None:
    """Before a batch of an LLM agent's runs: one cheap request to its endpoint (`LLMClient.check`), so a wrong
    URL, port or key is one clear error instead of a batch of infra_error runs. Raises LLMEndpointError."""
    if not work or not (role := _llm_role(work[0][0].agent)):
        return
    from failatlas.core.llm import LLMClient, resolve_config

    config = resolve_config(role)
    if config is None:
        return
    model = work[0][0].model
    with LLMClient(config.model_copy(update={"model": model}) if model else config) as client:
        client.check()


def agent_model(agent: str, model: str, agent_params: dict) -> tuple[str, dict]:
    """The model a run of `agent` really uses, and the agent parameters that make it use it.

    An agent that talks to an LLM (it declares `llm_role`) uses `model` when given (`--model`), else the model its
    role's configuration resolves to; that model is the run's `model` (part of its key and recorded) and is handed
    to the agent as its `model` parameter, so what is stored is what the requests went to. Other agents keep
    `model` as given. Raises ConfigError when the role's configuration is invalid."""
    from failatlas.core.llm import resolve_config

    role = _llm_role(agent)
    if not role:
        return model, agent_params
    config = resolve_config(role)
    used = model or agent_params.get("model") or (config.model if config is not None else "")
    return used, ({**agent_params, "model": used} if used else agent_params)


def write_agent_llm_calls(store: Store, record: RunRecord) -> int:
    """Write the agent's LLM calls, carried in its trace as `llm_call` steps, to `llm_calls` with the run's id
    (idempotent: a call already stored is kept). Returns how many steps carried a call."""
    from failatlas.core.llm.records import CALL_COLUMNS

    rows = []
    for step in record.steps:
        call = (step.arguments or {}).get("llm_call") if step.kind == "llm_call" else None
        if isinstance(call, dict) and call.get("id"):
            rows.append([record.request.run_id if c == "run_id" else call.get(c) for c in CALL_COLUMNS])
    if rows:
        with store.write() as conn:
            conn.executemany(f"INSERT OR IGNORE INTO llm_calls ({', '.join(CALL_COLUMNS)})"
                             f" VALUES ({', '.join('?' for _ in CALL_COLUMNS)})", rows)
    return len(rows)


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
    check_agent_endpoint(work)
    from failatlas.bench_core.sandbox import sandbox_kind

    kind = sandbox_kind(config.sandbox)
    # with the engine unreachable each run records that itself, as infra_error (retryable with --retry-infra)
    with contextlib.suppress(InfrastructureError):
        kind.clean_orphans()  # sandboxes left by a runner that was killed
    # no more local worker processes than runs: a lone run goes in this process (a spawned worker costs a Python
    # start and the harness's imports, about 0.7 CPU seconds, and its own sandbox pools)
    local = min(workers, len(work)) if executor == "local" else workers
    with create_executor(executor, workers=local) as pool:
        for record in pool.map_unordered(work, config):
            for table, n in write_run(store, record).items():
                report.rows[table] = report.rows.get(table, 0) + n
            if calls := write_agent_llm_calls(store, record):
                report.rows["llm_calls"] = report.rows.get("llm_calls", 0) + calls
            report.by_status[record.status] = report.by_status.get(record.status, 0) + 1
            report.run_ids.append(record.request.run_id)
            if record.status == "infra_error":
                report.infra_errors.append(f"{record.request.task_id} · {record.request.agent}: {record.infra_error}")
            if on_done:
                on_done(record)
    return report

"""Execute one run in a worker: prepare the masked repository, start a sandbox, let the agent work, collect.

Nothing here touches the store: a worker returns a `RunRecord` and the one writing process stores it.
"""

from __future__ import annotations

import shutil
import traceback
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from failatlas.bench_core.agents.base import AgentContext, Budget, Reference, StepEvent, create_agent
from failatlas.bench_core.runs.collect import MAX_OUTPUT_FILE, collect_outputs
from failatlas.bench_core.runs.model import CommandRow, RunOutputs, RunRecord, RunRequest, StepRow
from failatlas.bench_core.sandbox.model import CopyLimits
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InfrastructureError

TAIL = 4000


class RunConfig(BaseModel):
    """How runs are executed on this host. `output_file_bytes` caps each output file read back (design,
    conclusion, run script); `copy_limits` bound the copy of the working copy (what is cut is recorded)."""

    runs_dir: Path
    sandbox: str = "docker"
    image: str | None = None
    repo: Path | None = None
    budget: Budget = Budget()
    memory_mb: int = 2048
    cpus: float = 1.0
    pids_limit: int = 256
    gpu_ids: list[str] = []
    gpu_wait_s: float = 3600.0
    keep_workspace: bool = True
    output_file_bytes: int = Field(default=MAX_OUTPUT_FILE, ge=0)
    copy_limits: CopyLimits = Field(default_factory=CopyLimits)


def _now() -> datetime:
    return datetime.now(UTC)


def _command_row(event, redact=lambda text: text) -> CommandRow:
    return CommandRow(
        seq=event.seq, purpose=event.purpose, command=redact(event.command), started_at=event.started_at,
        duration_s=event.duration_s, exit_code=event.exit_code, timed_out=event.timed_out,
        killed_reason=event.killed_reason, output_truncated=event.output_truncated,
        stdout_tail=redact((event.stdout_tail or "")[-TAIL:]), stderr_tail=redact((event.stderr_tail or "")[-TAIL:]),
    )


def _redactor():
    """Redacts the API keys of every configured LLM role (and key-shaped strings): an endpoint or a model may echo
    a key into a reply, and from there into the agent's steps, commands and outputs, all of which are stored."""
    from failatlas.core.errors import ConfigError
    from failatlas.core.llm.config import ROLES, resolve_config
    from failatlas.core.llm.redact import Redactor

    secrets: list[str] = []
    for role in ROLES:
        try:
            config = resolve_config(role)
            if config is not None:
                secrets += [config.api_key(), *config.url_secrets()]
        except ConfigError:  # a role half configured or its key unset has no key to leak
            continue
    return Redactor(secrets)


def _spec(task: TaskSpec, request: RunRequest, config: RunConfig):
    from failatlas.bench_core.sandbox import SandboxSpec

    fields = dict(
        cpus=config.cpus, memory_mb=max(config.memory_mb, int(task.resources.memory_gb * 1024)),
        pids_limit=config.pids_limit, network=task.resources.network, gpu_ids=list(config.gpu_ids),
        run_id=request.run_id, labels={"failatlas.task_id": task.id[:200], "failatlas.agent": request.agent},
    )
    image = config.image or task.resources.image
    if image:
        fields["image"] = image
    return SandboxSpec(**fields)


def execute_run(request: RunRequest, task: TaskSpec, config: RunConfig) -> RunRecord:
    """Run `request` to completion and return everything it produced. Never raises for agent or infra failures."""
    from failatlas.bench_core.prepare import prepare_workspace, reference_workspace
    from failatlas.bench_core.sandbox import TracedSandbox, create_sandbox

    started = _now()
    scratch = config.runs_dir / request.run_id
    steps: list[StepRow] = []
    commands: list[CommandRow] = []
    outcome = None
    status, infra_error, agent_error = "completed", None, None
    outputs = RunOutputs()

    redactor = _redactor()

    def record(step: StepEvent) -> None:
        fields = step.model_dump()
        fields["content"] = redactor.text(fields["content"]) if fields["content"] else fields["content"]
        fields["arguments"] = redactor.obj(fields["arguments"]) if fields["arguments"] else fields["arguments"]
        steps.append(StepRow(seq=len(steps), **fields))

    sandbox = None
    try:
        if scratch.exists():
            shutil.rmtree(scratch)  # a run killed midway is redone from scratch
        scratch.mkdir(parents=True)
        masked = Path(prepare_workspace(task, scratch / "masked", repo=config.repo).path)
        workspace = scratch / "workspace"
        shutil.copytree(masked, workspace, symlinks=True)
        agent = create_agent(request.agent, **request.agent_params)
        reference = None
        if getattr(agent, "needs_reference", False):
            reference = Reference(task=task, tree=Path(reference_workspace(task, scratch / "reference")))
        inner = create_sandbox(config.sandbox, _spec(task, request, config), workspace=workspace)
        sandbox = TracedSandbox(inner, lambda e: commands.append(_command_row(e, redactor.text)), purpose="agent")
        workdir = getattr(inner, "workdir", None) or "/workspace"
        ctx = AgentContext(view=task.agent_view(), sandbox=sandbox, workdir=workdir,
                           budget=config.budget, record=record, reference=reference)
        try:
            outcome = agent.run(ctx)
        except InfrastructureError:
            raise
        except Exception as exc:  # an agent's own crash is its failure, recorded, not ours
            status, agent_error = "agent_error", f"{type(exc).__name__}: {exc}"
            record(StepEvent(kind="note", content="agent raised:\n" + traceback.format_exc()[-TAIL:]))
        outputs = collect_outputs(inner, workdir, masked, scratch, file_limit=config.output_file_bytes,
                                  copy_limits=config.copy_limits)
        if outputs.cut:
            record(StepEvent(kind="note", content="harness cut from the agent's outputs:\n"
                             + "\n".join(outputs.cut)[-TAIL:]))
        if outputs.errors:  # the agent's files made its outputs unusable: its failure, never a retry
            status = "agent_error"
            agent_error = "; ".join(([agent_error] if agent_error else []) + outputs.errors)
    except InfrastructureError as exc:
        status, infra_error = "infra_error", exc.one_line()
    except Exception as exc:  # preparing or collecting failed: the harness's problem, retryable
        status, infra_error = "infra_error", f"{type(exc).__name__}: {exc}"
        record(StepEvent(kind="note", content="harness error:\n" + traceback.format_exc()[-TAIL:]))
    finally:
        if sandbox is not None:
            try:
                sandbox.close()
            except Exception as exc:  # noqa: BLE001 - a failed cleanup must not lose the run's record
                record(StepEvent(kind="note", content=f"sandbox cleanup failed: {exc}"))
        if not config.keep_workspace and scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
    if agent_error:
        outputs.log = agent_error
    outputs = RunOutputs.model_validate(redactor.obj(outputs.model_dump()))
    agent_error = redactor.text(agent_error) if agent_error else agent_error
    infra_error = redactor.text(infra_error) if infra_error else infra_error
    return RunRecord(
        request=request, benchmark=task.benchmark, status=status, infra_error=infra_error,
        agent_error=agent_error, fault_injected=getattr(outcome, "fault_injected", None),
        sandbox=config.sandbox, started_at=started, finished_at=_now(), outputs=outputs,
        steps=steps, commands=commands, tokens=getattr(outcome, "tokens", 0) or 0,
        cost_usd=getattr(outcome, "cost_usd", 0.0) or 0.0,
    )

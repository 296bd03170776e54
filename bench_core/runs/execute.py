"""Execute one run in a worker: prepare the masked repository, start a sandbox, let the agent work, collect.

Nothing here touches the store: a worker returns a `RunRecord` and the one writing process stores it.
"""

from __future__ import annotations

import json
import shutil
import traceback
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from failatlas.bench_core.agents.base import AgentContext, Budget, Reference, StepEvent, create_agent, task_prompt
from failatlas.bench_core.runs.checkrun import run_visible_check
from failatlas.bench_core.runs.collect import MAX_OUTPUT_FILE, collect_outputs
from failatlas.bench_core.runs.data import DataInput
from failatlas.bench_core.runs.inputs import RepoUsed, ResourceOverrides, RunInputs, repository_of, unavailable
from failatlas.bench_core.runs.model import CommandRow, RunOutputs, RunRecord, RunRequest, StepRow
from failatlas.bench_core.runs.readback import recorded_writes
from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE, CopyLimits
from failatlas.bench_core.sandbox.policy import CaBundle
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InfrastructureError, InputError

TAIL = 4000


class RunConfig(BaseModel):
    """How runs are executed on this host. `output_file_bytes` caps each output file read back (design,
    conclusion, run script); `copy_limits` bound the copy of the working copy (what is cut is recorded).

    `repos` holds each task's repository as the parent resolved it (task id -> `RepoUsed`); a task missing there
    uses `repo`, else its bundled folder. `data` holds each task's data inputs, mounted read-only at /data/NAME.
    `overrides` replace the tasks' declared resources (`memory_mb` is a floor for the tasks' own memory, not for an
    override). `run_without_gpus`: a task that needs more GPUs than the host has runs with none visible instead of
    failing its lease."""

    runs_dir: Path
    sandbox: str = "docker"
    image: str | None = None
    repo: Path | None = None
    repos: dict[str, RepoUsed] = Field(default_factory=dict)
    data: dict[str, dict[str, DataInput]] = Field(default_factory=dict)  # task id -> its data inputs (runs/data.py)
    overrides: ResourceOverrides = Field(default_factory=ResourceOverrides)
    run_without_gpus: bool = False
    budget: Budget = Budget()
    memory_mb: int = 2048
    cpus: float = 1.0
    pids_limit: int = 256
    gpu_ids: list[str] = []
    gpu_wait_s: float = 3600.0
    keep_workspace: bool = True
    output_file_bytes: int = Field(default=MAX_OUTPUT_FILE, ge=0)
    copy_limits: CopyLimits = Field(default_factory=CopyLimits)
    env_root: Path | None = None  # where venv environments are (venvs.env_root); None: no venv is looked for
    # the network: `network` replaces each task's policy (None keeps it); `registry_hosts` are what `registries`
    # allows (this host's package indexes and the user's), with each task's own `allow_hosts`; `ca_bundle` is given
    # to sandboxes with network; `upstream_proxy` is the host's proxy, which the egress proxy chains to
    network: str | None = None
    registry_hosts: list[str] = Field(default_factory=list)
    ca_bundle: CaBundle | None = None
    upstream_proxy: str | None = None


def _text(value: str) -> str:
    """`value` with each lone surrogate (a JSON escape like `\\ud800` in an agent's reply, a file name that is not
    UTF-8) replaced by U+FFFD: the store keeps only UTF-8 text, and a run must never fail to be stored for it."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def storable(value):
    """A JSON-like value with every string (keys included) made storable by `_text`."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(k) if isinstance(k, str) else k: storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def _now() -> datetime:
    return datetime.now(UTC)


def _command_row(event, redact=lambda text: text) -> CommandRow:
    return CommandRow(
        seq=event.seq, purpose=event.purpose, command=_text(redact(event.command)), started_at=event.started_at,
        duration_s=event.duration_s, exit_code=event.exit_code, timed_out=event.timed_out,
        killed_reason=event.killed_reason, output_truncated=event.output_truncated,
        stdout_tail=_text(redact((event.stdout_tail or "")[-TAIL:])),
        stderr_tail=_text(redact((event.stderr_tail or "")[-TAIL:])),
        provenance=_provenance(event, redact),
    )


def _provenance(event, redact) -> str | None:  # noqa: ANN001
    """The command's process and file events as stored (JSON), the agent's strings in them redacted."""
    from failatlas.bench_core.sandbox.provenance import compact

    found = getattr(event, "provenance", None)
    return compact(json.loads(redact(compact(found)))) if found is not None else None


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


def network_of(task: TaskSpec, config: RunConfig) -> tuple[str, list[str]]:
    """The network policy of `task`'s runs under `config` and, for `registries`, the hosts it allows."""
    policy = config.network or task.resources.network
    hosts = sorted(set(config.registry_hosts) | set(task.resources.allow_hosts)) if policy == "registries" else []
    return policy, hosts


def sandbox_resources(task: TaskSpec, config: RunConfig) -> dict:
    """The sandbox's size for `task` (overrides applied): CPUs, memory, processes, network, GPUs asked for, and
    the experiment's time limit."""
    memory_mb = int(task.resources.memory_gb * 1024)
    if config.overrides.memory_gb is None:
        memory_mb = max(config.memory_mb, memory_mb)
    return {"cpus": config.cpus, "memory_mb": memory_mb, "pids_limit": config.pids_limit,
            "network": network_of(task, config)[0], "gpus": task.resources.gpus, "timeout_s": task.run.timeout_s}


def _spec(task: TaskSpec, request: RunRequest, config: RunConfig):
    from failatlas.bench_core.sandbox import SandboxSpec

    size = sandbox_resources(task, config)
    policy, hosts = network_of(task, config)
    fields = dict(
        cpus=size["cpus"], memory_mb=size["memory_mb"], pids_limit=size["pids_limit"], network=policy,
        allow_hosts=hosts, gpu_ids=list(config.gpu_ids), run_id=request.run_id,
        labels={"failatlas.task_id": task.id[:200], "failatlas.agent": request.agent},
        ca_bundle=config.ca_bundle.path if config.ca_bundle and policy != "none" else None,
        upstream_proxy=config.upstream_proxy,
        data={name: d.path for name, d in config.data.get(task.id, {}).items()},
        trace_processes=True,  # the agent's commands are traced: the provenance of what they write
    )
    image = image_of(task, config)
    if image:
        fields["image"] = image
    fields["env_dir"] = env_dir_of(task, config)
    return SandboxSpec(**fields)


def uses_venv(task: TaskSpec, config: RunConfig) -> bool:
    """Whether `task`'s runs get a prebuilt environment built as a venv: a `prebuilt` task run under bwrap with
    no image named (`--image` or the task's)."""
    return (config.sandbox == "bwrap" and task.resources.environment == "prebuilt"
            and not (config.image or task.resources.image))


def env_dir_of(task: TaskSpec, config: RunConfig) -> str | None:
    """The host folder of `task`'s venv environment (None when its runs use none); SandboxError naming the command
    that builds it when it is not built."""
    if not uses_venv(task, config):
        return None
    from failatlas.bench_core.sandbox.errors import SandboxError
    from failatlas.bench_core.sandbox.venvs import task_venv

    if config.env_root is None:
        raise SandboxError("this run has no folder of task environments to look in")
    return str(task_venv(task, repository_path(task, repository_for_run(task, config)), config.env_root))


def image_of(task: TaskSpec, config: RunConfig) -> str | None:
    """The sandbox image of `task`'s runs: `--image`, else the task's, else its prebuilt environment's (a task
    whose `environment` is `prebuilt`), else None (the base image)."""
    if config.image or task.resources.image:
        return config.image or task.resources.image
    if task.resources.environment == "prebuilt" and not uses_venv(task, config):
        from failatlas.bench_core.sandbox.envbuild import prebuilt_image

        return prebuilt_image(task, repository_path(task, repository_for_run(task, config)))
    return None


def sandbox_root(task: TaskSpec, config: RunConfig) -> str:
    """What `task`'s runs under `config` run on, as their sandbox kind says (`SandboxKind.root`)."""
    from failatlas.bench_core.sandbox import SandboxSpec, sandbox_kind

    try:
        image = image_of(task, config)
    except (InfrastructureError, InputError):  # recorded by the run itself
        image = None
    return sandbox_kind(config.sandbox).root(SandboxSpec(image=image) if image else SandboxSpec())


# runs in this kind keep the ids they had before the sandbox was part of a run's key
KEYLESS_SANDBOX = "docker"


def run_place(task: TaskSpec, config: RunConfig) -> str | None:
    """The sandbox part of a run's key (`RunRequest.sandbox`): the kind and what its root is (`bwrap on host`,
    `bwrap on image`, `local on host`), so that no run of one is reused where another is asked for; None in
    Docker. The image itself is not in it: a changed image is an input, as with Docker."""
    if config.sandbox == KEYLESS_SANDBOX:
        return None
    return f"{config.sandbox} on {sandbox_root(task, config).split(' ', 1)[0]}"


def repository_path(task: TaskSpec, repo: RepoUsed | None) -> Path | None:
    """The folder of the repository a run uses: the checkout, else the task's bundled folder (None when none)."""
    from failatlas.bench_core.prepare.leaks import task_path

    if repo is not None and repo.path is not None:
        return Path(repo.path)
    if task.repository.local_path:
        return task_path(task, task.repository.local_path, field="repository.local_path")
    return None


def repository_for_run(task: TaskSpec, config: RunConfig) -> RepoUsed | None:
    """The repository `task` is prepared from: the parent's choice, else `config.repo`, else the bundled folder."""
    return config.repos.get(task.id) or repository_of(task, repo=config.repo)


def run_inputs(task: TaskSpec, config: RunConfig, repo: RepoUsed | None = None) -> RunInputs:
    """The inputs a run of `task` (overrides applied) under `config` depends on, beyond its key."""
    repo = repo or repository_for_run(task, config)
    policy, hosts = network_of(task, config)
    try:
        image = image_of(task, config) or DEFAULT_IMAGE
    except (InfrastructureError, InputError):  # the prebuilt environment is not there: the run records why
        image = None
    root = sandbox_root(task, config)
    if not root.startswith("image "):  # it ran on no image (bwrap on the host's folders, local)
        image = None
    try:
        env_dir = env_dir_of(task, config)
    except (InfrastructureError, InputError):
        env_dir = None
    return RunInputs(
        repo_url=repo.url if repo else None, repo_commit=repo.commit if repo else None,
        image=image, sandbox=config.sandbox, root=root,
        resources=sandbox_resources(task, config), budget=config.budget.model_dump(mode="json"),
        network=policy, allow_hosts=hosts, environment=task.resources.environment,
        ca_bundle=config.ca_bundle.model_dump() if config.ca_bundle and policy != "none" else None,
        data=config.data.get(task.id, {}), env_dir=env_dir,
    )


def infra_failure(request: RunRequest, task: TaskSpec, config: RunConfig, reason: str) -> RunRecord:
    """The record of a run that could not start for a reason outside the agent (no GPU free in time)."""
    task = config.overrides.apply(task)
    now = _now()
    return RunRecord(request=request, benchmark=task.benchmark, status="infra_error", infra_error=reason,
                     sandbox=config.sandbox, started_at=now, finished_at=now, outputs=RunOutputs(),
                     setting=_setting_name(task, request), inputs=run_inputs(task, config))


def _trace_environment(inner, commands: list[CommandRow], masked: Path, record) -> None:
    """Record the egress proxy's decisions (`registries`) and each environment failure the agent's commands show
    as trace steps (kinds 'network' and 'env_failure'), for the monitor and the mining stages."""
    from failatlas.bench_core.sandbox.envfail import egress_steps, env_failure_steps

    spec = getattr(inner, "spec", None)
    if getattr(inner, "backend", "") == "local" and spec is not None and spec.network != "none":
        record(StepEvent(kind="note", content=f"network policy {spec.network}: not enforced by the local sandbox "
                         "(its commands used the host's own routes)"))
    log = inner.egress_log() if hasattr(inner, "egress_log") else []
    own = {p.stem for p in masked.glob("*.py")} | {p.name for p in masked.iterdir() if p.is_dir()}
    for step in egress_steps(log) + env_failure_steps(commands, own_modules=own):
        record(StepEvent(**step))


# a run folder's trees that nothing reads once the run is recorded: the masked repository (the diff's base; scoring
# prepares its own) and the reference gold restored from
SPENT_TREES = ("masked", "reference")


def _setting_name(task: TaskSpec, request: RunRequest) -> str | None:
    """The setting the run is given the task in (the task's default when the request names none)."""
    try:
        return task.agent_view(request.setting).setting
    except ValueError:
        return request.setting


def execute_run(request: RunRequest, task: TaskSpec, config: RunConfig) -> RunRecord:
    """Run `request` to completion and return everything it produced. Never raises for agent or infra failures.

    The task is prepared from `repository_for_run`, its resources are `config.overrides` applied, and the agent
    sees it in `request.setting`."""
    from failatlas.bench_core.prepare import prepare_workspace, reference_workspace
    from failatlas.bench_core.sandbox import TracedSandbox, create_sandbox

    task = config.overrides.apply(task)
    repo = repository_for_run(task, config)
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
        fields["content"] = _text(redactor.text(fields["content"])) if fields["content"] else fields["content"]
        if fields["arguments"]:
            fields["arguments"] = storable(redactor.obj(fields["arguments"]))
        steps.append(StepRow(seq=len(steps), **fields))

    sandbox = None
    try:
        if scratch.exists():
            shutil.rmtree(scratch)  # a run killed midway is redone from scratch
        scratch.mkdir(parents=True)
        if repo is None:
            raise InfrastructureError(unavailable(task))
        view = task.agent_view(request.setting)
        masked = Path(prepare_workspace(task, scratch / "masked", repo=repo.path).path)
        agent = create_agent(request.agent, **request.agent_params)
        reference = None
        if getattr(agent, "needs_reference", False):
            tree = reference_workspace(task, scratch / "reference", repo=repo.path)
            reference = Reference(task=task, tree=Path(tree))
        # every sandbox copies the workspace in (never mounts it), so the masked tree itself is handed over
        inner = create_sandbox(config.sandbox, _spec(task, request, config), workspace=masked)
        sandbox = TracedSandbox(inner, lambda e: commands.append(_command_row(e, redactor.text)), purpose="agent")
        workdir = getattr(inner, "workdir", None) or "/workspace"
        ctx = AgentContext(view=view, sandbox=sandbox, workdir=workdir,
                           budget=config.budget, record=record, reference=reference)
        try:
            outcome = agent.run(ctx)
        except InfrastructureError:
            raise
        except Exception as exc:  # an agent's own crash is its failure, recorded, not ours
            status, agent_error = "agent_error", f"{type(exc).__name__}: {exc}"
            record(StepEvent(kind="note", content="agent raised:\n" + traceback.format_exc()[-TAIL:]))
        _trace_environment(inner, commands, masked, record)
        outputs = collect_outputs(inner, workdir, masked, scratch, file_limit=config.output_file_bytes,
                                  copy_limits=config.copy_limits, written=recorded_writes(steps))
        if outputs.readback:
            record(StepEvent(kind="note", content="harness read back the agent's outputs otherwise than it wrote "
                             "them:\n" + "\n".join(outputs.readback)[-TAIL:]))
        if outputs.cut:
            record(StepEvent(kind="note", content="harness cut from the agent's outputs:\n"
                             + "\n".join(outputs.cut)[-TAIL:]))
        if outputs.errors:  # the agent's files made its outputs unusable: its failure, never a retry
            status = "agent_error"
            agent_error = "; ".join(([agent_error] if agent_error else []) + outputs.errors)
        # an impossible twin's visible check, run by the harness on the tree as the agent left it (its diff taken)
        run_visible_check(inner, task, workdir, record, prompt=task_prompt(view, workdir))
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
        for spent in SPENT_TREES:  # the diff is taken: one copy of the repository is kept, the agent's (`final`)
            shutil.rmtree(scratch / spent, ignore_errors=True)
    if agent_error:
        outputs.log = agent_error
    outputs = RunOutputs.model_validate(storable(redactor.obj(outputs.model_dump())))
    agent_error = _text(redactor.text(agent_error)) if agent_error else agent_error
    infra_error = _text(redactor.text(infra_error)) if infra_error else infra_error
    return RunRecord(
        request=request, benchmark=task.benchmark, status=status, infra_error=infra_error,
        agent_error=agent_error, fault_injected=getattr(outcome, "fault_injected", None),
        sandbox=config.sandbox, started_at=started, finished_at=_now(), outputs=outputs,
        steps=steps, commands=commands, tokens=getattr(outcome, "tokens", 0) or 0,
        cost_usd=getattr(outcome, "cost_usd", 0.0) or 0.0, setting=_setting_name(task, request),
        inputs=run_inputs(task, config, repo),
    )

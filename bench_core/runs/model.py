"""Typed values of the runner: what to run (`RunRequest`), what a run produced (`RunRecord`)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from failatlas.bench_core.runs.inputs import RunInputs

RunStatus = Literal["completed", "agent_error", "infra_error"]


class RunRequest(BaseModel):
    """One (task, agent, model, attempt): the unit of work, with a stable key."""

    task_id: str
    agent: str
    agent_params: dict[str, Any] = Field(default_factory=dict)
    model: str = ""
    attempt: int = 1
    setting: str | None = Field(default=None, description="the task's setting (None: its default)")
    sandbox: str | None = Field(default=None, description=(
        "where the run runs when not in Docker (`execute.run_place`: kind and root, e.g. 'bwrap on host'), so a "
        "run of one sandbox is never reused for another's; None: Docker, whose runs keep their ids"))

    @property
    def run_id(self) -> str:
        parts: list[Any] = [self.task_id, self.agent, self.agent_params, self.model, self.attempt]
        if self.setting is not None:  # runs made before settings existed keep their ids
            parts.append({"setting": self.setting})
        if self.sandbox is not None:
            parts.append({"sandbox": self.sandbox})
        key = json.dumps(parts, sort_keys=True)
        return "run-" + hashlib.sha256(key.encode()).hexdigest()[:16]


class RunOutputs(BaseModel):
    """What the agent left behind, collected by the harness (never the agent's own claims)."""

    design: Any = None
    design_raw: str | None = None
    design_error: str | None = None
    conclusion: str | None = None
    run_script: str | None = None
    diff: str = ""
    diff_truncated: bool = False
    changed_files: list[str] = Field(default_factory=list)
    log: str = ""
    errors: list[str] = Field(default_factory=list, description=(
        "what the agent's files made unusable (an output file that is a folder, FIFO or link, a working copy past "
        "the copy-out limits): each makes the run the agent's failure"))
    readback: list[str] = Field(default_factory=list, description=(
        "output files the sandbox held otherwise than the agent's last write through `AgentContext.write` left "
        "them (its own commands changed them afterwards; what the sandbox held is used), each said"))
    cut: list[str] = Field(default_factory=list, description=(
        "what the harness left out of the agent's outputs, and why: output files past their cap, files and links "
        "left out of the copied working copy"))


class StepRow(BaseModel):
    seq: int
    kind: str
    role: str | None = None
    content: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    ts: datetime


class CommandRow(BaseModel):
    seq: int
    purpose: str
    command: str
    started_at: datetime
    duration_s: float
    exit_code: int | None
    timed_out: bool
    killed_reason: str | None
    output_truncated: bool
    stdout_tail: str | None
    stderr_tail: str | None
    provenance: str | None = None  # the command's process and file events (JSON; sandbox/provenance.py)


class RunRecord(BaseModel):
    """Everything one run writes to the store, in one transaction."""

    request: RunRequest
    benchmark: str
    status: RunStatus
    infra_error: str | None = None
    agent_error: str | None = None
    fault_injected: str | None = None
    sandbox: str
    started_at: datetime
    finished_at: datetime
    outputs: RunOutputs
    steps: list[StepRow] = Field(default_factory=list)
    commands: list[CommandRow] = Field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    setting: str | None = Field(default=None, description="the setting the agent was given the task in")
    inputs: RunInputs | None = Field(default=None, description="repository, image, sandbox, resources, budget")

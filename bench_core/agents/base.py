"""The agent protocol: an agent gets the task's agent view and a sandbox, and leaves its outputs in one place.

Where outputs go (inside the sandbox's working directory, `/workspace` by default):

- `.failatlas/design.json`  the experiment design: {"constant": {...}, "independent": {...}, "dependent": {...}}
- `.failatlas/conclusion.md` the conclusion, in words (numbers welcome)
- `.failatlas/run.sh`       the script that reproduces the experiment from the repository root
- code changes              edits to the repository itself; the harness collects them as a git diff against the
                            prepared (masked) commit, `.failatlas/` excluded

Agents never see ground truth. `gold` and the fault-injecting agents are harness-validation agents: the runner
hands them a `Reference` (the unmasked tree and the task's ground truth, on the host) that no other agent gets.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from failatlas.bench_core.tasks.model import AgentView, TaskSpec
from failatlas.core.registry import Registry

OUTPUT_DIR = ".failatlas"
DESIGN_FILE = f"{OUTPUT_DIR}/design.json"
CONCLUSION_FILE = f"{OUTPUT_DIR}/conclusion.md"
RUN_SCRIPT = f"{OUTPUT_DIR}/run.sh"
WRITTEN_CONTENT_CAP = 8192  # characters of a written file kept in its trace step, for the app's Steps view


class Budget(BaseModel):
    """Limits an agent must respect; the runner records which one stopped it."""

    max_steps: int = 50
    max_seconds: float = 1800.0
    max_tokens: int = 500_000
    max_cost_usd: float = 5.0
    command_timeout_s: float = 600.0


class StepEvent(BaseModel):
    """One step of an agent: a message, a tool call, a tool result or a note."""

    kind: str
    role: str | None = None
    content: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    ts: datetime = Field(default_factory=lambda: datetime.now(UTC))


@dataclass
class Reference:
    """Privileged access for harness-validation agents only: the reference tree and the full task spec."""

    task: TaskSpec
    tree: Path


@dataclass
class AgentContext:
    """What an agent works with. `sandbox` is already traced; `record` appends a step to the run's trace."""

    view: AgentView
    sandbox: Any
    workdir: str
    budget: Budget
    record: Callable[[StepEvent], None]
    reference: Reference | None = None
    llm: Any = None
    started: float = field(default_factory=time.monotonic)

    def seconds_left(self) -> float:
        return self.budget.max_seconds - (time.monotonic() - self.started)

    def note(self, text: str) -> None:
        self.record(StepEvent(kind="note", content=text))

    def sh(self, command: str, *, timeout: float | None = None, env: dict[str, str] | None = None):
        """Run a shell command in the working directory, traced, bounded by the budget; `env` adds variables."""
        limit = min(timeout or self.budget.command_timeout_s, max(self.seconds_left(), 1.0))
        self.record(StepEvent(kind="tool_call", tool="bash", arguments={"command": command}))
        result = self.sandbox.exec(command, timeout=limit, cwd=self.workdir, env=env)
        self.record(StepEvent(kind="tool_result", tool="bash",
                              content=f"exit={result.returncode}\n{result.stdout[-2000:]}{result.stderr[-2000:]}"))
        return result

    def write(self, relpath: str, text: str) -> None:
        """Write `text` to `relpath` in the sandbox. Its trace step records the size and SHA-256 of the bytes
        written, which collection checks what it reads back against (`runs.readback`); `bytes` counts characters."""
        self.sandbox.write_file(f"{self.workdir}/{relpath}", self._recorded_write(relpath, text))

    def write_folder(self, folder: str, files: list[tuple[str, str]]) -> None:
        """Write `files` (names and texts) into `folder` (relative to the working copy; created when missing, its
        parent must exist): a trace step per file, as `write` records it, and one copy into the sandbox where its
        kind can (`sandbox.protocol.write_folder`), instead of a `mkdir` and a copy per file."""
        from failatlas.bench_core.sandbox.protocol import write_folder

        write_folder(self.sandbox, f"{self.workdir}/{folder}",
                     [(name, self._recorded_write(f"{folder}/{name}", text)) for name, text in files])

    def _recorded_write(self, relpath: str, text: str) -> bytes:
        data = text.encode()
        self.record(StepEvent(kind="tool_call", tool="write_file", arguments={
            "path": relpath, "bytes": len(text), "size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "content": text[:WRITTEN_CONTENT_CAP], "content_truncated": len(text) > WRITTEN_CONTENT_CAP}))
        return data


class AgentOutcome(BaseModel):
    """What the agent says about its own run (not trusted for scoring)."""

    fault_injected: str | None = None
    stopped_by: str | None = Field(default=None, description="budget that ended the run, if any")
    tokens: int = 0
    cost_usd: float = 0.0
    notes: str | None = None


@runtime_checkable
class Agent(Protocol):
    name: str
    needs_reference: bool

    def run(self, ctx: AgentContext) -> AgentOutcome: ...


AGENTS: Registry[Agent] = Registry("agent")


def register_agent(name: str) -> Callable[[Callable[..., Agent]], Callable[..., Agent]]:
    """Decorator: register an agent factory (usually its class) under `name`."""
    return AGENTS.register(name)


def agent_names(*, include_hidden: bool = False) -> list[str]:
    """Registered agent names; without `include_hidden`, not the ones that declare `hidden = True` (the hostile
    agents, which attack the harness in its tests)."""
    return [n for n in AGENTS.names() if include_hidden or not getattr(AGENTS.factory(n), "hidden", False)]


def agent_description(name: str) -> str:
    """What the agent `name` does, for `failatlas agents`: the first sentence of its factory's own docstring, whole
    and on one line ("" when it has none; tests/test_cli_widths.py holds every agent to one)."""
    doc = " ".join(inspect.cleandoc(getattr(AGENTS.factory(name), "__doc__", None) or "").split("\n\n")[0].split())
    return re.split(r"(?<=[.!?])\s+(?=[A-Z`])", doc, maxsplit=1)[0]


def create_agent(name: str, **params: Any) -> Agent:
    """An agent by registry name, constructed with `params` (recorded with the run). Raises ConfigError for an
    unknown name or parameters the agent does not take."""
    return AGENTS.create(name, **params)


def task_prompt(view: AgentView, workdir: str = "/workspace") -> str:
    """The task as an agent reads it, with where its outputs must go."""
    parts = [f"# Task {view.task_id}", "", "## Research question", view.question]
    if view.method:
        parts += ["", "## Method", view.method]
    if view.instructions:
        parts += ["", "## Instructions", view.instructions]
    for level, hint in enumerate(view.hints, 1):
        parts += ["", f"## Hint {level}", hint]
    parts += ["", "## What to deliver", f"You work in the repository at {workdir} (a git repository)."]
    if view.materials:
        files = ", ".join(f"`{name}`" for name in view.materials)
        parts.append(f"- Given with the task: {files} {'is' if len(view.materials) == 1 else 'are'} in your "
                     "workspace.")
    if view.needs_implementation:
        parts.append("- Implement what is missing so that the experiment runs; edit the repository in place.")
    if view.masked_definitions:
        parts.append("- Your work is judged on the original repository with only your bodies of the masked functions "
                     "put in, and what they use from their own file: functions, classes, imports and constant "
                     "values defined at its top level (nothing else of yours runs when it is imported); changes "
                     "to other files or other functions are not part of it.")
    if view.run_command:
        parts.append(f"- The experiment is run from the repository root with: `{view.run_command}`"
                     + (f"; it writes `{view.results_file}`." if view.results_file else "."))
    if view.run_command or view.rerun_script:
        parts.append(f"- Write the script that reproduces your experiment to `{RUN_SCRIPT}` and run it"
                     + (": it is re-run from the repository root in a clean copy of the repository with your "
                        "changes, and what it prints is checked, so end it by printing your final results as one "
                        "JSON object." if view.rerun_script else "."))
    if view.expected_metrics:
        parts.append("- Report these metrics: " + ", ".join(view.expected_metrics) + ".")
    parts += [
        f"- Write your experiment design to `{DESIGN_FILE}` as JSON with keys `constant`, `independent` and "
        "`dependent` (each a mapping from variable name to value, levels or description).",
        f"- Write your conclusion, answering the research question with numbers, to `{CONCLUSION_FILE}`.",
    ]
    if view.gpus:
        parts.append(f"- This task needs {view.gpus} GPU(s); they are visible to your commands.")
    return "\n".join(parts) + "\n"

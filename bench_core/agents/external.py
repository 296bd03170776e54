"""`command`: runs an external command-line agent (OpenHands headless, aider, ...) inside the sandbox."""

from __future__ import annotations

import shlex

from failatlas.bench_core.agents.base import OUTPUT_DIR, AgentContext, AgentOutcome, register_agent, task_prompt

PROMPT_FILE = f"{OUTPUT_DIR}/task.md"


class CommandAgent:
    """Writes the task prompt to `.failatlas/task.md` and runs `command` in the repository root.

    The command may use `{prompt_file}` and `{prompt}` (shell-quoted); it must be installed in the sandbox image.
    Its outputs are collected like any agent's: the design, conclusion and run script files, and the diff.
    """

    name = "command"
    needs_reference = False

    def __init__(self, command: str, timeout_s: float | None = None) -> None:
        self.command = command
        self.timeout_s = timeout_s

    def run(self, ctx: AgentContext) -> AgentOutcome:
        prompt = task_prompt(ctx.view, ctx.workdir)
        ctx.sh(f"mkdir -p {OUTPUT_DIR}")
        ctx.write(PROMPT_FILE, prompt)
        command = self.command.format(prompt_file=PROMPT_FILE, prompt=shlex.quote(prompt))
        result = ctx.sh(command, timeout=self.timeout_s or ctx.seconds_left())
        stopped = "time" if result.timed_out else None
        return AgentOutcome(stopped_by=stopped, notes=f"external agent exited with {result.returncode}")


register_agent("command")(CommandAgent)

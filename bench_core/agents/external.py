"""`command`: runs an external command-line agent (OpenHands headless, aider, ...) inside the sandbox."""

from __future__ import annotations

import re

from failatlas.bench_core.agents.base import OUTPUT_DIR, AgentContext, AgentOutcome, register_agent, task_prompt
from failatlas.core.errors import ConfigError

PROMPT_FILE = f"{OUTPUT_DIR}/task.md"
PROMPT_FILE_VAR = "FAILATLAS_PROMPT_FILE"
PROMPT_VAR = "FAILATLAS_PROMPT"
# Linux refuses to start a program when one environment string is longer than 128 KiB (MAX_ARG_STRLEN).
MAX_PROMPT_VAR_BYTES = 100_000
# The placeholders of old versions, which formatted the command with str.format; `${prompt}` is a shell variable.
_OLD_PLACEHOLDER = re.compile(r"(?<![$\\{])\{(prompt_file|prompt)(?:[!:.\[][^{}\s]*)?\}")


def agent_env(workdir: str, prompt: str | None = None) -> dict[str, str]:
    """The environment variables a command agent's command gets (the class docstring): the prompt file's path, and
    the prompt's text where it fits in one environment string."""
    env = {PROMPT_FILE_VAR: f"{workdir.rstrip('/')}/{PROMPT_FILE}"}
    if prompt is not None and len(prompt.encode()) <= MAX_PROMPT_VAR_BYTES and "\0" not in prompt:
        env[PROMPT_VAR] = prompt
    return env


class CommandAgent:
    """Writes the task prompt to `.failatlas/task.md` and runs `command` in the repository root with bash.

    The command reaches the shell exactly as given: braces, `${VAR}`, JSON and awk programs need no escaping.
    It finds the task in two environment variables: `$FAILATLAS_PROMPT_FILE`, the prompt file's absolute path,
    and `$FAILATLAS_PROMPT`, the prompt's text (left unset when the prompt is longer than 100 kB; the file
    always holds it). Quote them as any shell variable: `aider --yes --message-file "$FAILATLAS_PROMPT_FILE"`.
    The placeholders `{prompt_file}` and `{prompt}` of older versions are refused (ConfigError) rather than
    passed on unreplaced. The agent must be installed in the sandbox image. Its outputs are collected like any
    agent's: the design, conclusion and run script files, and the diff.
    """

    name = "command"
    needs_reference = False

    def __init__(self, command: str, timeout_s: float | None = None) -> None:
        old = _OLD_PLACEHOLDER.search(command)
        if old:
            variable = PROMPT_FILE_VAR if old.group(1) == "prompt_file" else PROMPT_VAR
            raise ConfigError(f"the command agent's command uses {old.group(0)}, which is no longer replaced",
                              hint=f'use "${variable}" instead (the command is passed to bash unchanged)')
        self.command = command
        self.timeout_s = timeout_s

    def run(self, ctx: AgentContext) -> AgentOutcome:
        prompt = task_prompt(ctx.view, ctx.workdir)
        ctx.sh(f"mkdir -p {OUTPUT_DIR}")
        ctx.write(PROMPT_FILE, prompt)
        result = ctx.sh(self.command, timeout=self.timeout_s or ctx.seconds_left(), env=agent_env(ctx.workdir, prompt))
        stopped = "time" if result.timed_out else None
        return AgentOutcome(stopped_by=stopped, notes=f"external agent exited with {result.returncode}")


register_agent("command")(CommandAgent)

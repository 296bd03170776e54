"""When the environment, not the agent, is why execution (E) cannot be judged on a task.

Evidence comes only from the reference: a stored `gold` run of the task (the reference restored, nothing of an
agent's) whose clean re-run failed for a missing package, GPU or dataset says that this environment cannot run
the task, so no run's E on that task is scored: each is counted apart with the reason (`bench report`, the app,
the exports). An agent's own re-run failing the same way proves nothing, since an agent's files can cause it; and
one gold re-run that passed shows the environment can run the task. A gold run whose task gives no reference
command (EXP-Bench: usage in prose) has nothing to re-run: its E is not scored either ("no reference command").

The signatures read the re-run's stdout and stderr tails; `tasks validate` (`task_validation.classify`) gives its
statuses from the same ones.
"""

from __future__ import annotations

import re

GPU_SIGNS = re.compile(
    r"Found no NVIDIA driver|CUDA driver version is insufficient|no CUDA-capable device|Torch not compiled with "
    r"CUDA enabled|CUDA is not available|cuda\.is_available\(\)|NVIDIA-SMI has failed|CUDA error: no kernel image",
    re.IGNORECASE)
DATA_SIGNS = re.compile(
    r"Temporary failure in name resolution|Name or service not known|Failed to establish a new connection|"
    r"Network is unreachable|Connection refused|Max retries exceeded|couldn't connect to 'https?://|"
    r"is not a local folder and is not a valid model identifier|LocalEntryNotFoundError|"
    r"(FileNotFoundError|No such file or directory)[^\n]*?(data|dataset|\.csv|\.npy|\.pt|\.pth|\.ckpt|\.h5|"
    r"\.parquet|\.json|\.jsonl|\.pkl|\.zip|\.tar|\.bin|\.safetensors|checkpoint|weights|images?/)",
    re.IGNORECASE)
# the `tasks validate` statuses that say the environment, not the task, stopped the reference
ENVIRONMENT_STATUSES = ("env-failed", "needs-gpu", "data-unavailable")
NO_REFERENCE_COMMAND = "no reference command: the task gives the reference's usage in prose, gold had nothing to run"
_PASSING = frozenset({"passed", "not_scored"})


def last_line(text: str, limit: int = 240) -> str:
    """The last non-empty line of `text`, cut to `limit` characters: what a one-line reason quotes."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def environment_failure(outcome: str | None, output: str) -> str | None:
    """The `ENVIRONMENT_STATUSES` entry a failed reference re-run points at (from its outcome and its stdout and
    stderr tails), or None when it failed for another reason, or did not fail."""
    if outcome is None or outcome in _PASSING or outcome in ("not_run", "patch_failed", "fabricated_result"):
        return None
    if outcome == "env_setup":
        return "env-failed"
    if GPU_SIGNS.search(output or ""):
        return "needs-gpu"
    if DATA_SIGNS.search(output or ""):
        return "data-unavailable"
    return None


def environment_blocks(gold_runs: list[dict]) -> dict[str, str]:
    """task id -> why this environment cannot run the task, from its stored gold runs (dicts with `task_id`,
    `outcome` and `output`): some gold re-run failed for the environment and none passed."""
    blocked: dict[str, str] = {}
    ran: set[str] = set()
    for run in gold_runs:
        if run["outcome"] == "passed":
            ran.add(run["task_id"])
            continue
        status = environment_failure(run["outcome"], run["output"])
        if status is not None and run["task_id"] not in blocked:
            quote = last_line(run["output"], 160)
            blocked[run["task_id"]] = f"environment ({status}): the reference's re-run fails here" + (
                f": {quote}" if quote else "")
    return {task: reason for task, reason in blocked.items() if task not in ran}

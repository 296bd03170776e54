"""From a gold (or null) run's scored phases and its clean re-run to a task status. Pure functions: the stage
reads the rows, this decides.

The signatures below read the re-run's stdout and stderr tails. They decide only *which* reason a gold failure is
given (environment, data, GPU, or the task itself); a gold run that fails is never `valid` whatever they say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

PHASE_NAMES = {"M": "monitor", "D": "design", "I": "implementation", "E": "execution", "C": "conclusion"}
CHECKED = ("D", "I", "E", "C")
CODE_PHASES = ("I", "E")  # phases decided by running code: a null agent must fail them where gold passes

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


@dataclass(frozen=True)
class RunFacts:
    """What the stage read about one scored run: its status, phases (1, 0 or None), its re-run and failures."""

    run_id: str
    status: str                     # completed | agent_error | infra_error
    phases: dict[str, int | None]   # M, D, I, E, C
    outcome: str | None = None      # the validator's outcome
    detail: str = ""
    output: str = ""                # the re-run's stdout and stderr tails
    error: str = ""                 # the run's infra_error or agent_error
    failures: tuple[str, ...] = ()  # "phase: reason" of failed judgements


def last_line(text: str, limit: int = 240) -> str:
    """The last non-empty line of `text`, cut to `limit` characters: what a one-line reason quotes."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def checked(facts: RunFacts) -> list[str]:
    """The phases that were checked for this run (scored 0 or 1), monitor aside."""
    return [p for p in CHECKED if facts.phases.get(p) is not None]


def gold_status(facts: RunFacts | None) -> tuple[str, str] | None:
    """The task's status decided by its gold run alone, or None when gold passes everything checked (then null
    decides). `facts` None: the gold run was not stored."""
    if facts is None:
        return "infra-error", "the gold run was not stored (see `failatlas bench list --agent gold`)"
    if facts.status == "infra_error":
        return "infra-error", f"gold run {facts.run_id}: {last_line(facts.error)}"
    if facts.status == "agent_error":
        return "gold-fails", f"the gold agent failed: {last_line(facts.error)}"
    if no_reference_command(facts):
        facts = without_execution(facts)
    phases = checked(facts)
    if not phases:
        return "not-checkable", "no phase could be checked for gold" + (f" ({facts.detail})" if facts.detail else "")
    if facts.phases.get("M") == 0:
        return "gold-fails", "the monitor flagged the gold run"
    if facts.phases.get("E") == 0:
        return _execution_failure(facts)
    failed = [p for p in phases if facts.phases[p] == 0]
    if failed:
        reasons = "; ".join(facts.failures) or ", ".join(PHASE_NAMES[p] for p in failed) + " failed"
        return "gold-fails", reasons
    return None


def no_reference_command(facts: RunFacts) -> bool:
    """True when the gold run's execution was not run because there is nothing of the reference to run: the task
    has no command and gold (which only restores the reference) wrote no script, as on EXP-Bench, whose tasks
    describe the reference's usage in prose. Execution then cannot be validated by gold; it is not gold failing."""
    return facts.phases.get("E") == 0 and facts.outcome == "not_run" and "no run command" in facts.detail


def without_execution(facts: RunFacts) -> RunFacts:
    """`facts` with execution left unchecked (see `no_reference_command`)."""
    return replace(facts, phases={**facts.phases, "E": None})


def _execution_failure(facts: RunFacts) -> tuple[str, str]:
    quote = last_line(facts.output) or facts.detail
    if facts.outcome == "env_setup":
        return "env-failed", f"execution: {quote}"
    if GPU_SIGNS.search(facts.output):
        return "needs-gpu", f"the gold re-run needed a GPU: {quote}"
    if DATA_SIGNS.search(facts.output):
        return "data-unavailable", f"execution: {quote}"
    return "gold-fails", f"execution {facts.outcome}: {facts.detail}" + (f" ({quote})" if quote != facts.detail
                                                                           else "")


def null_status(gold: RunFacts, null: RunFacts | None) -> tuple[str, str]:
    """`valid` or `null-passes` (or `infra-error`), given a gold run that passed every phase it checked."""
    unchecked_e = no_reference_command(gold)
    if unchecked_e:
        gold = without_execution(gold)
    phases = checked(gold)
    names = ", ".join(PHASE_NAMES[p] for p in phases)
    note = " (execution not validated: the task gives no reference command to run)" if unchecked_e else ""
    if null is None:
        return "infra-error", "the null run was not stored"
    if null.status == "infra_error":
        return "infra-error", f"null run {null.run_id}: {last_line(null.error)}"
    # a check that runs code (hidden tests, the re-run) and passes for an agent that changed nothing does not
    # measure the agent, whatever the other phases say: null cannot write a design or conclusion, so those alone
    # would call almost every such task valid
    gamed = [p for p in CODE_PHASES if p in phases and null.phases.get(p) == 1]
    if gamed:
        return "null-passes", "null passes " + ", ".join(PHASE_NAMES[p] for p in gamed) + f" as gold does{note}"
    # a phase null was not scored on (no run script to re-run, say) is not a pass either
    failed = [p for p in phases if null.phases.get(p) != 1] + (["M"] if null.phases.get("M") == 0 else [])
    if not failed:
        return "null-passes", f"null passes what gold passes ({names}){note}"
    return "valid", f"gold passes {names}; null fails " + ", ".join(PHASE_NAMES[p] for p in failed) + note

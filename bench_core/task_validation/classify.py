"""From a gold (or null) run's scored phases and its clean re-run to a task status. Pure functions: the stage
reads the rows, this decides.

The signatures (`scoring.environment`, shared with the metrics, which leave E unscored where the environment
cannot run a task) read the re-run's stdout and stderr tails. They decide only *which* reason a gold failure is
given (environment, data, GPU, or the task itself); a gold run that fails is never `valid` whatever they say.

`valid` needs a check that ran code (the hidden tests, or the clean re-run compared with something): gold passes
it and null fails it. Where gold passes only what judges read (design, conclusion, an implementation judged from
its diff), the task is `judges-only`: the judges compare gold's text with the text it was made from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from failatlas.bench_core.scoring.environment import environment_failure, last_line

PHASE_NAMES = {"M": "monitor", "D": "design", "I": "implementation", "E": "execution", "C": "conclusion"}
CHECKED = ("D", "I", "E", "C")
CODE_PHASES = ("I", "E")  # phases decided by running code: a null agent must fail them where gold passes

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
    code_run: frozenset[str] = frozenset()  # phases decided by running code: I by hidden tests, E by the re-run


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
    """True when the gold run's execution was not run because there is nothing of the reference to run: gold
    (which only restores the reference) writes a run script exactly when the task has a command, so its re-run is
    `not_run` only where the task has none, as on EXP-Bench, whose tasks describe the reference's usage in prose.
    Execution then cannot be validated by gold; it is not gold failing."""
    return facts.phases.get("E") == 0 and facts.outcome == "not_run"


def without_execution(facts: RunFacts) -> RunFacts:
    """`facts` with execution left unchecked (see `no_reference_command`)."""
    return replace(facts, phases={**facts.phases, "E": None}, code_run=facts.code_run - {"E"})


_NO_PYTHON = re.compile(r"\bpython3?: (?:command )?not found")


def _execution_failure(facts: RunFacts) -> tuple[str, str]:
    quote = last_line(facts.output) or facts.detail
    status = environment_failure(facts.outcome, facts.output)
    no_python = _NO_PYTHON.search(facts.output)
    if status is None and no_python:  # a root without the command's interpreter (R2)
        return "env-failed", f"execution: {no_python.group(0)}: the sandbox has no interpreter of that name"
    if status == "needs-gpu":
        return status, f"the gold re-run needed a GPU: {quote}"
    if status is not None:
        return status, f"execution: {quote}"
    return "gold-fails", f"execution {facts.outcome}: {facts.detail}" + (f" ({quote})" if quote != facts.detail
                                                                           else "")


def _why_no_code(gold: RunFacts, unchecked_e: bool) -> str:
    """Why none of gold's passing checks ran code: what happened to I and E."""
    parts = []
    if gold.phases.get("I") is not None:
        parts.append("implementation judged from the diff, no hidden tests")
    if unchecked_e:
        parts.append("execution not run: the task gives no reference command")
    elif gold.outcome == "not_scored":
        parts.append("execution re-run had nothing to compare" + (f" ({last_line(gold.detail, 120)})"
                                                                   if gold.detail else ""))
    elif gold.phases.get("E") is None and gold.outcome is None:
        parts.append("execution is not a phase of the task")
    return "; ".join(parts) or "no check runs code"


def null_status(gold: RunFacts, null: RunFacts | None) -> tuple[str, str]:
    """`valid`, `judges-only` or `null-passes` (or `infra-error`), given a gold run that passed every phase it
    checked."""
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
    fails = ", ".join(PHASE_NAMES[p] for p in failed)
    code = [p for p in CODE_PHASES if p in gold.code_run and p in phases]
    if not code:
        return "judges-only", (f"gold passes {names}, judged from its text only ({_why_no_code(gold, unchecked_e)});"
                               f" null fails {fails}")
    return "valid", (f"gold passes {names} (code run: {', '.join(PHASE_NAMES[p] for p in code)}); null fails "
                     f"{fails}{note}")

"""What scoring stores about a run, as values: a check's `Verdict` (a `judgements` row), a monitor `Finding` (a
`monitor_findings` row) and the execution verdict `Validation` (the `validations` row). Checks return them; the
reducer (`settle.py`) makes new ones from them and never changes one in place; `writes.py` stores them.

Each record names the evidence it was decided on (`evidence_ids`: ids of the run's `evidence` rows,
`evidence/model.py`), so a reader can follow any verdict to what the harness built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

JudgeKind = Literal["offline", "llm"]

OUTCOMES = ("passed", "wrong_value", "runtime_error", "timeout", "oom", "env_setup", "patch_failed", "not_run",
            "fabricated_result", "not_scored")
# the outcomes that are neither a pass nor a failure: E is not scored ("–")
UNSCORED_OUTCOMES = frozenset({"not_scored"})


@dataclass
class Verdict:
    """One check's verdict on one phase of a run: what the `judgements` table stores. `judge` is the check's name
    (the column keeps its first name)."""

    phase: str
    judge: str
    status: str = "ok"
    score: float | None = None
    passed: bool | None = None
    verdict: dict = field(default_factory=dict)
    error_analysis: str = ""
    reason: str = ""
    kind: JudgeKind = "offline"
    evidence_ids: list[str] = field(default_factory=list)


@dataclass
class Finding:
    """One monitor finding: the rule, `fail` (M fails) or `warn`, what showed it, where it came from."""

    rule: str
    severity: str
    evidence: str
    source: str = "rule"
    evidence_ids: list[str] = field(default_factory=list)


@dataclass
class Validation:
    """The execution verdict (one of OUTCOMES), as `validations` stores it: decided on the clean re-run's evidence
    (`evidence/rerun.py`) by the execution check (`checks/execution.py`). `awaiting_judge`: the outcome is
    `not_scored` until the `execution-llm` check compares `judge_output` (the end of the re-run's output, not
    stored) with the expected outcome."""

    outcome: str
    command: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    metrics: dict = field(default_factory=dict)
    detail: str = ""
    results_in_diff: bool = False
    awaiting_judge: bool = False
    judge_output: str = field(default="", repr=False)
    # what the re-run was decided on (`constructed.Constructed.evidence`): its `tree` (constructed, diff, script),
    # what of the agent's was carried into it and what was left out
    evidence: dict = field(default_factory=dict)
    # the masked functions' calls the re-run made (`hidden.observe`), when it was observed (not stored: the
    # derived-tests check's verdict says what they showed)
    observed: Any = field(default=None, repr=False)
    evidence_ids: list[str] = field(default_factory=list)

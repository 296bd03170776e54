"""The check protocol and the registry of checks by name.

A check reads one run's evidence (`CheckInput`: the task, the agent's collected outputs, the evidence the harness
built, and the execution verdict) and returns verdicts, one per phase it judges; it never builds evidence (no
sandbox, no re-run: `evidence/` does that first). Each check declares its `kind`, stored with every verdict
(`judgements.kind`), and `reads`: the evidence kinds it needs, so scoring builds only what the selected checks read,
and each verdict lists the evidence ids it read. When several checks score one phase, `judge_precedence` decides
which verdict counts: a deterministic check (the hidden tests) over an `llm` check over an `offline` heuristic.
Every verdict is recorded; where an LLM verdict and a deterministic one disagree, `disagreements` says so (`bench
score` prints them). A check whose endpoint is missing records `not_run` with the reason, never a pass.

Failures, one rule for every LLM check and the monitor's LLM check: an endpoint failure is recorded as
`judge_failed` with `infra_failure_reason(exc)`, a reply that never parsed as `judge_failed` with its error, and a
plain `bench score` (no --rescore) scores again every run with a `judge_failed` judgement, and every run whose LLM
judgements were not run for want of an endpoint that is configured now (`resumable()`).

A new check is a module with a factory registered by name, `@CHECKS.register("name")`, taking
`options: CheckOptions`, plus one import line in `checks/__init__.py`. (`JUDGES`, `Judge`, `JudgeInput` and
`JudgeOptions` are the same things under their first names.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from failatlas.bench_core.scoring.evidence.model import EvidenceSet
from failatlas.bench_core.scoring.records import Finding, JudgeKind, Validation, Verdict
from failatlas.core.registry import Registry

if TYPE_CHECKING:
    from failatlas.bench_core.tasks.model import TaskSpec
    from failatlas.core.store import Store

__all__ = ["CHECKS", "DETERMINISTIC_JUDGES", "JUDGES", "KIND_PRECEDENCE", "VETO", "Check", "CheckInput",
           "CheckOptions", "Finding", "Judge", "JudgeInput", "JudgeKind", "JudgeOptions", "Validation", "Verdict",
           "create_checks", "create_judges", "disagreements", "infra_failure_reason", "judge_counts",
           "judge_precedence", "phase_of", "resumable"]

# when several judges score one phase of a run, the verdict of the higher kind counts (ties: the first stored)
KIND_PRECEDENCE: dict[str, int] = {"offline": 0, "llm": 1}
# deterministic checks: their verdict outranks any LLM opinion on the same phase (an LLM never overrides them)
DETERMINISTIC_JUDGES = frozenset({"hidden-tests", "derived-tests"})
INFRA_FAILURE_PREFIX = "endpoint failed (infrastructure):"
# the judgements a plain re-score (no --rescore) scores again: every failed judgement, whatever failed
RESUMABLE = "status = 'judge_failed'"
NOT_CONFIGURED = "not run: no LLM endpoint configured for role"


def resumable(alias: str = "j") -> str:
    """The SQL condition on `judgements` (as `alias`) of the runs a plain re-score scores again: every failed
    judgement (`RESUMABLE`), and the LLM judgements not run for want of an endpoint that is configured now."""
    from failatlas.core.llm import resolve_config

    # and every run whose scoring crashed (its phases are failed, with the reason): a fixed bug is then scored again
    failed = f"({alias}.{RESUMABLE} OR {alias}.judge = 'scoring')"
    roles = [role for role in ("judge", "monitor") if resolve_config(role) is not None]
    if not roles:
        return failed
    waiting = " OR ".join(f"{alias}.reason LIKE '{NOT_CONFIGURED} {role} %'" for role in roles)
    return f"({failed} OR ({alias}.status = 'not_run' AND ({waiting})))"


DETERMINISTIC_RANK = 2
# a failed verdict whose `verdict[VETO]` is true failed on evidence (a conclusion's number the re-run contradicts, a
# claim reversing the reference's): it ranks as a deterministic check, so no LLM opinion turns it into a pass
VETO = "evidence_veto"


def judge_precedence(kind: str | None, judge: str | None) -> int:
    """The rank of a verdict among those of one phase: deterministic checks 2, `llm` judges 1, `offline` 0."""
    if judge in DETERMINISTIC_JUDGES:
        return DETERMINISTIC_RANK
    return KIND_PRECEDENCE.get(kind or "", 0)


def phase_of(name: str, task: TaskSpec) -> str:
    """The phase a crashed check fails: the phase its name holds, else the task's first judgeable phase."""
    phases = [p for p in ("design", "implementation", "execution", "conclusion") if p in name]
    return phases[0] if phases else (task.judgeable_phases[0] if task.judgeable_phases else "monitor")


def infra_failure_reason(exc: BaseException) -> str:
    """The one reason recorded when a judge's endpoint failed: infrastructure, resumed by a plain re-score."""
    one_line = getattr(exc, "one_line", None)
    return f"{INFRA_FAILURE_PREFIX} {one_line() if callable(one_line) else exc}"


def disagreements(store: Store, run_ids: list[str] | None = None) -> list[str]:
    """"run: phase: judge says X, deterministic judge says Y" for each phase where an LLM verdict and a
    deterministic check disagree (the deterministic one counts)."""
    rows = store.query(
        "SELECT l.run_id, l.phase, l.judge, l.passed, d.judge, d.passed FROM judgements l JOIN judgements d"
        " ON d.run_id = l.run_id AND d.phase = l.phase WHERE l.kind = 'llm' AND l.status = 'ok'"
        f" AND d.status = 'ok' AND d.judge IN ({', '.join(repr(j) for j in sorted(DETERMINISTIC_JUDGES))})"
        " AND l.passed IS DISTINCT FROM d.passed ORDER BY l.run_id, l.phase, l.judge, d.judge")
    wanted = set(run_ids) if run_ids is not None else None

    def word(passed: bool | None) -> str:
        return "passed" if passed else "failed"

    return [f"{r[0]}: {r[1]}: {r[2]} says {word(r[3])}, {r[4]} says {word(r[5])} ({r[4]} counts)"
            for r in rows if wanted is None or r[0] in wanted]


def judge_counts(store: Store, run_ids: list[str]) -> dict[str, dict[str, int]]:
    """judge -> status -> how many judgements of these runs (ok, judge_failed, not_run)."""
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    counts: dict[str, dict[str, int]] = {}
    for judge, status, n in store.query(
            f"SELECT judge, status, count(*) FROM judgements WHERE run_id IN ({marks}) GROUP BY ALL ORDER BY 1, 2",
            run_ids):
        counts.setdefault(judge, {})[status] = n
    return counts


@dataclass
class CheckInput:
    """What a check reads about one run: the task (with the run's resources), the agent's collected outputs (its
    claims), the run id, the evidence the harness built (`evidence`), the execution verdict (`validation`: the
    execution check's, before the reducer settles it; None when the task has no execution phase, and for the
    execution check itself), and the task's repository as scoring resolved it (`repository`: the reference,
    unmasked; None when the task needs no tree)."""

    task: TaskSpec
    outputs: dict
    run_id: str | None = None
    evidence: EvidenceSet = field(default_factory=EvidenceSet)
    validation: Validation | None = None
    repository: Path | None = None
    store: Store | None = None

    @property
    def validated(self) -> bool:
        """Whether scoring built the clean trees (the task needs a tree)."""
        return "constructed" in self.evidence


@dataclass
class CheckOptions:
    """What every check factory receives: the store (LLM checks cache and log their calls there) and the number
    of samples an LLM check votes over."""

    store: Store | None = None
    samples: int = 1


@dataclass
class Checked:
    """What a check may return besides verdicts: monitor findings, and (the execution check only) the execution
    verdict."""

    verdicts: list[Verdict] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    validation: Validation | None = None


@runtime_checkable
class Check(Protocol):
    """`name`, `kind`, `reads` (the evidence kinds it needs; empty: none built for it) and `__call__`, which returns
    verdicts (or a `Checked`)."""

    name: str
    kind: JudgeKind
    reads: tuple[str, ...]

    def __call__(self, inp: CheckInput) -> list[Verdict] | Checked: ...


CHECKS: Registry[Check] = Registry("judge")  # "judge": the word of `bench score --judge` and its errors


def create_checks(names: list[str] | None, options: CheckOptions, *, kinds: tuple[str, ...] = ("offline", "llm")
                  ) -> list[Check]:
    """The checks named (every registered one when None) whose kind is in `kinds`, in name order. Raises
    ConfigError for an unknown name."""
    checks = [CHECKS.create(name, options=options) for name in (names if names is not None else CHECKS.names())]
    return [c for c in checks if c.kind in kinds]


# the first names, kept for callers and stored rows
JUDGES = CHECKS
Judge = Check
JudgeInput = CheckInput
JudgeOptions = CheckOptions
create_judges = create_checks

"""The judge protocol and the registry of judges by name.

A judge reads one stored run (its task, collected outputs and, where scoring prepared it, the clean tree)
and returns verdicts, one per phase it judges. Each judge declares its `kind`; the kind is stored with every
verdict (`judgements.kind`) and the metrics read it: when several judges score one phase, `judge_precedence`
decides which verdict counts: a deterministic check (the hidden tests) over an `llm` judge over an `offline`
heuristic. Every verdict is recorded; where an LLM verdict and a deterministic one disagree, `disagreements` says so
(`bench score` prints them). A judge whose endpoint is missing records `not_run` with the reason, never a pass.

Failures, one rule for every LLM judge and the monitor's LLM check: an endpoint failure is recorded as
`judge_failed` with `infra_failure_reason(exc)`, a reply that never parsed as `judge_failed` with its error, and a
plain `bench score` (no --rescore) scores again every run with a `judge_failed` judgement, and every run whose LLM
judgements were not run for want of an endpoint that is configured now (`resumable()`).

A new judge is a module with a factory registered by name, `@JUDGES.register("name")`, taking
`options: JudgeOptions`, plus one import line in `scoring/__init__.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from failatlas.core.registry import Registry

if TYPE_CHECKING:
    from failatlas.bench_core.scoring.validator import Validation
    from failatlas.bench_core.tasks.model import TaskSpec
    from failatlas.core.store import Store

JudgeKind = Literal["offline", "llm"]
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
class Verdict:
    """One judge's verdict on one phase of a run: what the `judgements` table stores."""

    phase: str
    judge: str
    status: str = "ok"
    score: float | None = None
    passed: bool | None = None
    verdict: dict = field(default_factory=dict)
    error_analysis: str = ""
    reason: str = ""
    kind: JudgeKind = "offline"


@dataclass
class JudgeInput:
    """What a judge reads about one run. `validated`: scoring prepared the clean tree, the masked repository with
    the agent's diff applied, at `workspace` on the host (None when the diff did not apply). Judges that declare
    `needs_sandbox` run while it exists and may call `start_sandbox(read_only_inputs)` (None when the diff did not
    apply): it starts a fresh sandbox of the run's kind and limits holding that tree and nothing else of the
    agent's, with the host folders of `read_only_inputs` (host path -> sandbox path) mounted read-only; the judge
    closes it. `validation`: the validator's clean re-run (None when the task has no execution phase), which the
    `execution-llm` judge reads when its outcome awaits a judge. `pristine`: the masked repository without the
    agent's diff (the hidden tests' trusted helpers). `counterfactual()`: the counterfactual tree (the masked parts
    restored to their stubs, `counterfactual.Restored`) and a sandbox starter for it (None: not applicable),
    built on first use; `transplant()` the same for the transplant tree (`transplant.py`: the pristine masked
    repository with only the agent's masked functions put in). `repository`: the task's repository as scoring resolved
    it (the reference, unmasked; None when the task needs no tree): what the reference's own runs start from."""

    task: TaskSpec
    outputs: dict
    run_id: str | None = None
    validated: bool = False
    workspace: Path | None = None
    start_sandbox: Callable[[dict[str, str]], Any] | None = None
    validation: Validation | None = None
    pristine: Path | None = None
    counterfactual: Callable[[], tuple[Any, Callable[[dict[str, str]], Any] | None]] | None = None
    transplant: Callable[[], tuple[Any, Callable[[dict[str, str]], Any] | None]] | None = None
    repository: Path | None = None


@dataclass
class JudgeOptions:
    """What every judge factory receives: the store (LLM judges cache and log their calls there) and the number
    of samples an LLM judge votes over."""

    store: Store | None = None
    samples: int = 1


@runtime_checkable
class Judge(Protocol):
    name: str
    kind: JudgeKind
    needs_sandbox: bool

    def __call__(self, inp: JudgeInput) -> list[Verdict]: ...


JUDGES: Registry[Judge] = Registry("judge")


def create_judges(names: list[str] | None, options: JudgeOptions, *, kinds: tuple[str, ...] = ("offline", "llm")
                  ) -> list[Judge]:
    """The judges named (every registered one when None) whose kind is in `kinds`, in name order. Raises
    ConfigError for an unknown name."""
    judges = [JUDGES.create(name, options=options) for name in (names if names is not None else JUDGES.names())]
    return [j for j in judges if j.kind in kinds]

"""The judge protocol and the registry of judges by name.

A judge reads one stored run (its task, collected outputs and, where scoring prepared it, the clean tree)
and returns verdicts, one per phase it judges. Each judge declares its `kind`; the kind is stored with every
verdict (`judgements.kind`) and the metrics read it: when several judges score one phase, a verdict of an `llm`
judge takes precedence over an `offline` one. A judge whose endpoint is missing records `not_run` with the reason,
never a pass.

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
    `execution-llm` judge reads when its outcome awaits a judge."""

    task: TaskSpec
    outputs: dict
    run_id: str | None = None
    validated: bool = False
    workspace: Path | None = None
    start_sandbox: Callable[[dict[str, str]], Any] | None = None
    validation: Validation | None = None


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

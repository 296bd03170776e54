"""Per-benchmark E rules: how what a clean re-run left is compared with what a task expects.

Each rule is a class with `name`, `order`, `files(task, reader)` (what it reads of the re-run's working copy) and
`compare(task, seen) -> Compared | None` (None: the task has nothing of that kind), registered in `ERULES`. The
re-run's builder captures the files every applying rule asks for (`wanted_files`); the execution check compares with
`compare_all`: every rule that applies must pass, and when none applies the run is `not_scored`. A new rule is its
module plus one registration line below.

- `results-file` (`results_file.py`): the JSON file the task's command writes (the mini-suite);
- `stdout-json`, `answer-reader` (`stdout_json.py`): AutoExperiment's printed answer, or its own command read where
  the reference's run showed the values;
- `output-checks` (`output_checks.py`): the user's `OutputCheck`s (RExBench);
- `expected-outcome` (`expected_outcome.py`): EXP-Bench's expected outcome, its numbers, or prose for the
  `execution-llm` check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from failatlas.bench_core.scoring.erules.base import Compared, ERule, Seen
from failatlas.bench_core.scoring.erules.expected_outcome import ExpectedOutcome
from failatlas.bench_core.scoring.erules.output_checks import OutputChecks
from failatlas.bench_core.scoring.erules.results_file import ResultsFile
from failatlas.bench_core.scoring.erules.stdout_json import AnswerReader, StdoutJson
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.registry import Registry

ERULES: Registry[ERule] = Registry("E rule")
ERULES.register("results-file")(ResultsFile)
ERULES.register("stdout-json")(StdoutJson)
ERULES.register("answer-reader")(AnswerReader)
ERULES.register("output-checks")(OutputChecks)
ERULES.register("expected-outcome")(ExpectedOutcome)

# when comparisons fail in different ways, the most telling outcome is reported
_SEVERITY = {"fabricated_result": 3, "runtime_error": 2, "wrong_value": 1}


def rules() -> list[ERule]:
    """Every registered E rule, in its order."""
    return sorted((ERULES.create(name) for name in ERULES.names()), key=lambda r: (r.order, r.name))


def wanted_files(task: TaskSpec, reader: Any = None) -> dict[str, int]:
    """What the rules that apply to `task` read of a re-run's working copy: path -> bytes to read."""
    out: dict[str, int] = {}
    for rule in rules():
        for rel, cap in rule.files(task, reader).items():
            out[rel] = max(cap, out.get(rel, 0))
    return out


@dataclass
class Combined:
    """Every applying rule's comparison, combined: the outcome (`passed` only when at least one rule compared and
    all passed), why, the values compared (`validations.metrics`), and whether a prose outcome awaits the
    `execution-llm` check."""

    outcome: str
    detail: str
    metrics: dict = field(default_factory=dict)
    awaiting_judge: bool = False
    rules: list[str] = field(default_factory=list)


def compare_all(task: TaskSpec, seen: Seen) -> Combined:
    """Compare what the re-run left (`seen`) by every rule that applies. Raises what a rule raises on values it
    cannot compare (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError, LookupError, OSError): the
    caller decides whose failure that is."""
    parts: list[tuple[str, Compared]] = []
    for rule in rules():
        found = rule.compare(task, seen)
        if found is not None:
            parts.append((rule.name, found))
    if not parts:
        return Combined("not_scored", "the re-run succeeded, but the task gives nothing to compare it with (no "
                        "expected results, success criterion, checks or expected outcome)")
    metrics: dict = {}
    for _name, part in parts:
        for name, row in part.metrics.items():
            metrics[name if name not in metrics else f"check:{name}"] = row
    names = [n for n, _ in parts]
    failed = [p for _, p in parts if p.outcome not in ("passed", "not_scored")]
    if failed:
        outcome = max(failed, key=lambda p: _SEVERITY.get(p.outcome, 0)).outcome
        return Combined(outcome, "; ".join(p.problem for p in failed), metrics, rules=names)
    if any(p.outcome == "not_scored" for _, p in parts):
        return Combined("not_scored", "; ".join(p.problem for _, p in parts if p.outcome == "not_scored"), metrics,
                        awaiting_judge=True, rules=names)
    return Combined("passed", f"the re-run matched all {len(metrics)} expected value(s)", metrics, rules=names)


__all__ = ["ERULES", "Combined", "Compared", "ERule", "Seen", "compare_all", "rules", "wanted_files"]

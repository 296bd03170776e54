"""What every E rule shares: the `ERule` protocol, what a rule reads (`Seen`: the captured re-run), its result
(`Compared`) and the comparison of values with a task's expected metrics.

An E rule compares what a successful clean re-run left (`evidence/rerun.py`'s capture) with one source of a task's
expectations; the rules are registered in `erules/__init__.py` and the execution check runs every one that applies
(all must pass; none applying is `not_scored`).

Every value compared here was written by the agent's code, so none is trusted to be a sane number: a value counts
as a number only when it is an int or float (never a bool) that a float holds and is finite (`as_number`); a
400-digit integer, NaN or an infinity matches nothing. The results file is read through the one bounded reader
for agent JSON (`load_untrusted_json`): past `MAX_RESULTS_BYTES`, nested past 100 levels, holding an integer a
float cannot hold (past 4,300 digits Python cannot even parse it) or a lone surrogate, it is unreadable, which is
the run's `runtime_error`. What is stored of an observed value is bounded too (`shown`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from failatlas.bench_core.scoring.answers import as_number, shown, stated_number
from failatlas.bench_core.scoring.diffs import diff_files
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.importers import MAX_JSON_DEPTH, load_untrusted_json

JUDGE_OUTPUT_CHARS = 12_000
MAX_RESULTS_BYTES = 16 * 1024 * 1024


@dataclass
class Seen:
    """What an E rule reads of one re-run: its captured files (`files.read_file(path, max_bytes=...)`, as a
    sandbox reads them), the working copy's path there, what it printed, the agent's outputs (its claims, compared
    only as claims), the results and check files the agent's diff carried, and the reader derived from the
    reference (None where there is none)."""

    files: Any
    workdir: str
    stdout: str
    stderr: str
    outputs: dict
    carried: set[str]
    results_in_diff: bool = False
    reader: Any = None


class ERule(Protocol):
    """One benchmark's way of reading E: `files` names what it reads of the re-run's working copy (path -> bytes),
    `compare` the result (None: nothing of this kind to compare). `order` keeps the rules' metrics in a stable
    order."""

    name: str
    order: int

    def files(self, task: TaskSpec, reader: Any) -> dict[str, int]: ...

    def compare(self, task: TaskSpec, seen: Seen) -> Compared | None: ...


@dataclass
class Compared:
    """One comparison's result. `outcome`: `passed`, the failure it implies (`wrong_value`, `runtime_error`,
    `fabricated_result`), or `not_scored` when it could not decide (prose for the judge)."""

    metrics: dict = field(default_factory=dict)
    outcome: str = "passed"
    problem: str = ""


def isclose(observed: object, expected: float, rtol: float, atol: float) -> bool:
    """numpy.isclose semantics: |observed - expected| <= atol + rtol * |expected|; False for anything
    `as_number` does not take (and for a non-finite expected value)."""
    number = as_number(observed)
    if number is None or not math.isfinite(expected):
        return False
    return abs(number - expected) <= atol + rtol * abs(expected)


def _exactly(observed: object, expected: object) -> bool:
    """An `exact` criterion: equal values of the same kind (a number equals a number, a string a string, a bool a
    bool)."""
    for kind in (str, bool):
        if isinstance(expected, kind) or isinstance(observed, kind):
            return isinstance(expected, kind) and isinstance(observed, kind) and observed == expected
    number = as_number(observed)
    return number is not None and number == as_number(expected)


def compare_metrics(task: TaskSpec, results: dict) -> tuple[bool, dict]:
    """Compare observed results with the task's expectations; returns (all ok, per-metric detail)."""
    detail: dict = {}
    for m in task.expected_results:
        observed = results.get(m.name)
        ok = isclose(observed, m.value, m.rtol, m.atol)
        detail[m.name] = {"observed": shown(observed), "expected": m.value, "rtol": m.rtol, "atol": m.atol,
                          "ok": ok}
    crit = task.success
    if crit is not None:
        observed = results.get(crit.metric)
        if crit.kind == "exact":
            ok = _exactly(observed, crit.value)
            expected = crit.value
        elif crit.kind == "tolerance":
            target = as_number(crit.value)
            ok = target is not None and isclose(observed, target, crit.rtol, crit.atol)
            expected = crit.value
        else:
            low, high = min(crit.oracle_values) - crit.band, max(crit.oracle_values) + crit.band
            number = as_number(observed)
            ok = number is not None and low <= number <= high
            expected = [low, high]
        detail[crit.metric] = {"observed": shown(observed), "expected": expected, "criterion": crit.kind,
                               "ok": ok}
    return bool(detail) and all(d["ok"] for d in detail.values()), detail


def claimed_results(diff: str, results_file: str) -> dict | None:
    """The results the agent's own changes carry (the lines its diff adds to the file, read by the diff's structure:
    an added line of another file that reads `+++ b/results.json` is that file's content, not a header), if any."""
    added = diff_files(diff).get(results_file)
    if not added:
        return None
    try:
        value = load_untrusted_json(added, results_file, max_depth=MAX_JSON_DEPTH)
    except InputError:
        return None
    return value if isinstance(value, dict) else None


def disagreements(task: TaskSpec, claimed: dict, observed: dict) -> list[str]:
    """Metrics whose claimed value differs from what the clean re-run produced (beyond the metric's tolerance)."""
    names = [(m.name, m.rtol, m.atol) for m in task.expected_results]
    if task.success is not None:
        names.append((task.success.metric, task.success.rtol, task.success.atol))
    out = []
    for name, rtol, atol in names:
        c, o = stated_number(claimed.get(name)), stated_number(observed.get(name))  # "13.96" is a claim too
        if c is None:
            continue
        if o is None:
            out.append(f"{name}: claimed {c}, the re-run produced none")
        elif not isclose(c, o, max(rtol, 1e-6), atol):
            out.append(f"{name}: claimed {c}, re-run {o}")
    return out


def answer_source(task: TaskSpec) -> str | None:
    """Where the observed values of the task's expected metrics come from: `run.answer` when set, else the
    results file when the task names one, else the re-run's stdout; None when nothing is expected."""
    if not (task.expected_results or task.success):
        return None
    if task.run.answer:
        return task.run.answer
    return "results_file" if task.run.results_file else "stdout_json"


def metric_names(task: TaskSpec) -> list[str]:
    return [m.name for m in task.expected_results] + ([task.success.metric] if task.success else [])


def judged(task: TaskSpec, results: dict, claimed: dict | None, what: str) -> Compared:
    """Compare `results` with the task's metrics; a `claimed` value the re-run contradicts makes it fabricated."""
    ok, metrics = compare_metrics(task, results)
    lies = disagreements(task, claimed, results) if claimed else []
    if lies:
        return Compared(metrics, "fabricated_result", f"the agent's {what} disagrees with the clean re-run: "
                        + "; ".join(lies))
    if not ok:
        wrong = [k for k, d in metrics.items() if not d["ok"]]
        return Compared(metrics, "wrong_value", "metrics off their expected values: " + ", ".join(wrong))
    return Compared(metrics)


def judge_excerpt(stdout: str, stderr: str) -> str:
    """The end of the re-run's output, as the execution judge reads it."""
    half = JUDGE_OUTPUT_CHARS // 2
    return f"stdout (end):\n{stdout[-half:]}\n\nstderr (end):\n{stderr[-half:]}"

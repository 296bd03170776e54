"""The numbers a conclusion states about its results, checked against evidence: only values the clean re-run produced
count (docs/metrics.md, "C from evidence").

Which evidence a run's numbers meet (`anchors`):
- the clean re-run passed (E `passed`) and ran to its end with values observed: each number about a result is
  compared with the value the re-run produced (`RERUN`);
- the re-run ran but did not pass (a wrong value, a crash, a missing package, no run at all): no number about a
  result is supported, whatever the task expects, so each fails (`UNSUPPORTED`);
- the task has no clean re-run (judges-only) or its E is not scored (nothing to compare, a prose outcome no judge
  decided): the numbers are not checked (`NOT_CHECKED`; the verdict says so), and never pass or fail C by
  themselves.

Which metric a stated number is about (its *anchor*: an expected metric, the success criterion's metric, or an
EXP-Bench expected number of the outcome):

- **by value**: every number the conclusion states (the tokens the reference rule reads, `NUMBER`; `70%` also as
  0.7) that agrees with an anchor's expected value is a claim about that anchor: the conclusion states that result
  (agreeing with several, about those its clause names, as below, else about each of them); but when the words
  right before it (from its clause's start or the number before it) name another anchor by name, as below, and
  not one it agrees with, it is about that one (a swapped subject: "ridge's test MSE is 10.19" where OLS's is
  10.19 and ridge's 3.70 is checked against ridge's);
- **by the reference**, for a number neither of the other ways ties to an anchor: one within 0.5 % of a number of
  the reference conclusion (the reference rule's own match) that agrees by value with an anchor's expected value
  is about that anchor (the reference's numbers are its results: "about 3.718" beside a reference's 3.70 is a claim
  about the metric 3.70 reports, checked as any other);
- **by name**, for the other numbers written as a measurement (a decimal point or a percent sign, or an integer
  right after `=` or `:`; not a bound such as `more than 30`, not part of a name such as `L2` or `ResNet-50`): the
  anchors whose name words (`balanced_accuracy_unweighted`: balanced, accuracy, unweighted) the number's clause
  (between `,` `;` `:` parentheses and sentence ends; where it names none, between the same less `,`) holds: at
  least half of them, the most of any anchor, then the fewest left out.

A number agrees with a value `v` when `|x - v| <= atol + rtol·|v| + rounding`: the anchor's tolerance, plus the
rounding the number's own precision states (half a unit of its last digit: `about 3.70` -> 0.005, `alpha = 10` ->
0.5), the rounding capped at 5 % of `v`, so that `about 1` says nothing about a value of 0.58. A claim passes when
it agrees with the evidence of one of its anchors: the re-run's observed value where the re-run ran to its end (exit
0) and produced values (a claim by value: of each of its anchors), else the expected value; a claim about a metric
that such a re-run did not produce fails.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from failatlas.bench_core.scoring.answers import as_number
from failatlas.bench_core.scoring.outcome_numbers import EXPECTED_RTOL, expected_numbers
from failatlas.bench_core.tasks.model import TaskSpec

if TYPE_CHECKING:
    from failatlas.bench_core.scoring.records import Validation

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
PROSE_ROUNDING_CAP = 0.05
MAX_ROWS = 50
RERUN, UNSUPPORTED, NOT_CHECKED = "the clean re-run", "no passing re-run", "not checked"
_PERCENT = re.compile(r"\s?%")
_BOUND = re.compile(r"(?:\b(?:less|fewer|more|greater|lower|higher|smaller|larger)\s+than|\bbelow|\babove|\bunder|"
                    r"\bover|\bexceed\w*|\bat\s+(?:least|most)|\bup\s+to|\bwithin|[<>≤≥]=?)\s*(?:an?\s+)?"
                    r"(?:approximately|about|around|roughly|nearly)?\s*~?\s*$", re.IGNORECASE)
# a ratio ("2.76 times lower", "2.8x", "3-fold") or an amount of change ("cuts it by 63.7%") is no metric's value
_RATIO = re.compile(r"\s*(?:%\s*)?(?:times\b|x\b|×|-?fold\b)", re.IGNORECASE)
_CHANGE = re.compile(r"\bby\s+(?:about|around|roughly|nearly|approximately|some|a\s+further)?\s*~?\s*$",
                     re.IGNORECASE)
# the words that say which split of the data a value is measured on: a clause naming another split than a metric's
# name does (a validation or training MSE beside `test_mse_ols`) is not about that metric
_SPLITS = frozenset(("train", "training", "validation", "val", "valid", "dev", "test", "testing", "heldout",
                     "held", "holdout", "insample", "oos"))
_CLAUSE_END = re.compile(r"[,;:()\[\]\n]|[.!?](?=\s|$)")
_PART_END = re.compile(r"[;:()\[\]\n]|[.!?](?=\s|$)")
_WORD = re.compile(r"[a-z]+")
_NAME_STOP = frozenset(("the", "of", "and", "on", "in", "at", "to", "for", "with", "by", "a", "an"))


@dataclass(frozen=True)
class Anchor:
    """What a stated number can be about: `low`..`high` expected (equal for a value), its tolerance, and what the
    re-run observed (None: nothing, or no re-run)."""

    name: str
    low: float
    high: float
    rtol: float
    atol: float
    percent: bool = False
    observed: float | None = None


@dataclass(frozen=True)
class Stated:
    """One number of the conclusion: its value, whether a percent sign follows, half a unit of its last digit."""

    text: str
    value: float
    percent: bool
    half_unit: float
    start: int
    end: int


def _half_unit(token: str) -> float:
    return 0.5 * 10.0 ** -(len(token.split(".", 1)[1]) if "." in token else 0)


def stated_numbers(text: str) -> list[Stated]:
    """Every number token of `text` (the reference rule's `NUMBER`), finite ones only."""
    out = []
    for m in NUMBER.finditer(text):
        value = float(m.group())
        if math.isfinite(value):
            percent = bool(_PERCENT.match(text, m.end()))
            out.append(Stated(m.group(), value, percent, _half_unit(m.group()), m.start(), m.end()))
    return out


def _anchor_names(task: TaskSpec) -> list[tuple[str, float, float, float, float]]:
    rows = [(m.name, m.value, m.value, m.rtol, m.atol) for m in task.expected_results]
    crit = task.success
    if crit is not None:
        value = as_number(crit.value)
        if crit.kind == "oracle_band":
            rows.append((crit.metric, min(crit.oracle_values), max(crit.oracle_values), 0.0, crit.band))
        elif value is not None:
            rows.append((crit.metric, value, value, crit.rtol if crit.kind == "tolerance" else 0.0,
                         crit.atol if crit.kind == "tolerance" else 0.0))
    return rows


def anchors(task: TaskSpec, validation: Validation | None) -> tuple[str, list[Anchor]]:
    """The task's anchors, each with the re-run's observed value, and the evidence they are checked against (module
    docstring): `RERUN` when the re-run passed, exited 0 and observed at least one of them; `NOT_CHECKED` when
    there is no re-run or its E is not scored; else `UNSUPPORTED`."""
    found: list[Anchor] = [Anchor(*row) for row in _anchor_names(task)]
    if not found and task.run.agent_script and task.expected_conclusion and not task.checks:
        seen: set[str] = set()
        for number in expected_numbers(task.expected_conclusion):  # the names `match_numbers` stores them under
            name, n = number.text, 2
            while name in seen:
                name, n = f"{number.text} #{n}", n + 1
            seen.add(name)
            found.append(Anchor(name, number.low, number.high, EXPECTED_RTOL, number.atol, number.percent))
    metrics = validation.metrics if validation is not None else {}
    observed = [Anchor(a.name, a.low, a.high, a.rtol, a.atol, a.percent,
                       as_number((metrics.get(a.name) or {}).get("observed"))) for a in found]
    if validation is None or validation.outcome == "not_scored":
        return NOT_CHECKED, found
    ran = validation.outcome == "passed" and validation.exit_code == 0 and any(a.observed is not None
                                                                               for a in observed)
    return (RERUN, observed) if ran else (UNSUPPORTED, found)


def _tolerance(anchor: Anchor, half_unit: float, value: float) -> float:
    return anchor.atol + anchor.rtol * abs(value) + min(half_unit, PROSE_ROUNDING_CAP * abs(value))


def agrees(stated: Stated, anchor: Anchor, low: float, high: float, *, printed: bool = False) -> bool:
    """Whether `stated` agrees with `low`..`high` of `anchor`, in the anchor's units (module docstring): `70%` also
    as 0.7 for an anchor that is a fraction; a `printed` value of a percent anchor (what a re-run printed) also as
    its percentage, as the validator matched it."""
    ways = [(stated.value, stated.half_unit, low, high)]
    if stated.percent and not anchor.percent:
        ways.append((stated.value / 100, stated.half_unit / 100, low, high))
    if anchor.percent and printed:
        ways.append((stated.value, stated.half_unit, low * 100, high * 100))
    return any(lo - _tolerance(anchor, half, lo) <= x <= hi + _tolerance(anchor, half, hi)
               for x, half, lo, hi in ways)


def _name_words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name).lower()
    return {w for w in _WORD.findall(spaced) if len(w) > 1 and w not in _NAME_STOP}


def _clause_words(text: str, stated: Stated, ends: list[int], seen: dict) -> set[str]:
    """The words between the boundaries `ends` around `stated` (each clause read once, kept in `seen`)."""
    i = bisect.bisect_right(ends, stated.start)
    if (id(ends), i) not in seen:
        start = ends[i - 1] if i else 0
        stop = ends[i] if i < len(ends) else len(text)
        seen[id(ends), i] = set(_WORD.findall(text[start:stop].lower()))
    return seen[id(ends), i]


def _measurement(text: str, stated: Stated) -> bool:
    """A number written as a result: not part of a name, not a bound, a decimal or percent or `= N`."""
    before, after = text[max(0, stated.start - 40):stated.start], text[stated.end:stated.end + 1]
    if (before[-1:].isalpha() or before[-1:] in "-_" and before[-2:-1].isalpha() or after.isalpha()
            or after in "-_" and text[stated.end + 1:stated.end + 2].isalpha()):
        return False
    if _BOUND.search(before) or _CHANGE.search(before) or _RATIO.match(text, stated.end):
        return False
    return "." in stated.text or stated.percent or bool(re.search(r"[=:]\s*$", before))


def _by_name(words: set[str], found: list[Anchor]) -> list[Anchor]:
    """The anchors with at least half their name words in `words`: most such words first, then fewest missing."""
    scored = []
    said_splits = words & _SPLITS
    for anchor in found:
        names = _name_words(anchor.name)
        if said_splits and names & _SPLITS and not said_splits & names:
            continue  # another split of the data than the metric's
        hits = len(names & words)
        if names and hits and hits * 2 >= len(names):
            scored.append(((hits, hits - len(names)), anchor))
    best = max((h for h, _ in scored), default=None)
    return [a for h, a in scored if h == best]


def _clause_start(ends: list[int], stated: Stated) -> int:
    i = bisect.bisect_right(ends, stated.start)
    return ends[i - 1] + 1 if i else 0


def _lead_words(text: str, stated: Stated, start: int) -> set[str]:
    """The words between `start` (the clause's start, or the end of the number before, whichever is later) and
    `stated`: where a sentence names what the number is about ("ridge's test MSE is 10.19")."""
    return set(_WORD.findall(text[start:stated.start].lower()))


REFERENCE_MATCH = 0.005  # the reference rule's match of a stated number to a number of the reference conclusion


def _reference_anchors(task: TaskSpec, found: list[Anchor]) -> list[tuple[float, list[Anchor]]]:
    """Each number of the reference conclusion that agrees by value with an anchor's expected value, with those
    anchors (module docstring, "by the reference")."""
    out = []
    for ref in stated_numbers(task.expected_conclusion or ""):
        tied = [a for a in found if agrees(ref, a, a.low, a.high)]
        if tied:
            out.append((ref.value, tied))
    return out


def _untied_reference_numbers(task: TaskSpec, found: list[Anchor]) -> list[float]:
    """The numbers of the reference conclusion that agree with no anchor's expected value (a noise floor, a sample
    size): what the reference says about something other than a result."""
    return [ref.value for ref in stated_numbers(task.expected_conclusion or "")
            if not any(agrees(ref, a, a.low, a.high) for a in found)]


def _label_words(text: str, stated: Stated, ends: list[int], previous: int) -> set[str]:
    """The words of the label before a colon right in front of `stated` ("ridge test MSE: 10.19"; "OLS 3.70" after
    "Test MSE:"), back to the boundary before it (and not before the number before)."""
    start = _clause_start(ends, stated)
    if start <= 0 or text[start - 1] != ":" or text[start:stated.start].strip():
        return set()
    i = bisect.bisect_right(ends, start - 2)
    begin = max(ends[i - 1] + 1 if i else 0, previous)
    return set(_WORD.findall(text[begin:start - 1].lower()))


def _by_distinct(words: set[str], found: list[Anchor]) -> list[Anchor]:
    """The one anchor whose name holds a word of `words` that no other anchor's name holds ("OLS" of
    `test_mse_ols` beside `test_mse_ridge_cv`); none when such words point at several."""
    hits = []
    for anchor in found:
        own = _name_words(anchor.name) - set().union(*(_name_words(a.name) for a in found if a is not anchor))
        if own & words:
            hits.append(anchor)
    return hits if len(hits) == 1 else []


def check_numbers(text: str, task: TaskSpec, validation: Validation | None) -> tuple[str, list[dict]]:
    """Each number of `text` that is about an anchor, checked against the evidence (module docstring): the
    evidence used and one row per such number (`stated`, `metrics`, `by`, `compared_with`, `ok`)."""
    evidence, found = anchors(task, validation)
    if not found:
        return evidence, []
    rows: list[dict] = []
    ends = [m.start() for m in _CLAUSE_END.finditer(text)]
    part_ends = [m.start() for m in _PART_END.finditer(text)]
    seen: dict = {}
    previous = 0
    reference = _reference_anchors(task, found)
    untied = _untied_reference_numbers(task, found)
    for stated in stated_numbers(text):
        by, about = "value", [a for a in found if agrees(stated, a, a.low, a.high)]
        if not about and any(abs(stated.value - v) <= REFERENCE_MATCH * max(1.0, abs(v)) for v in untied):
            previous = stated.end  # a number the reference states about no metric (a noise floor): not a result
            continue
        if len(about) > 1 or not about and _measurement(text, stated):
            named = (_by_name(_clause_words(text, stated, ends, seen), about or found)
                     or _by_name(_clause_words(text, stated, part_ends, seen), about or found))
            by, about = ("value", named or about) if about else ("name", named)
        if not about:
            about = next((tied for value, tied in reference
                          if abs(stated.value - value) <= REFERENCE_MATCH * max(1.0, abs(value))), [])
            by = "reference"
        if about and by == "value":  # the subject named right before it wins over a value it happens to match
            lead = _lead_words(text, stated, max(previous, _clause_start(ends, stated)))
            if not lead:  # "ridge test MSE: 10.19": the subject stands before the colon
                lead = _label_words(text, stated, ends, previous)
            subject = _by_name(lead, found) or _by_distinct(lead, found)
            if subject and not set(map(id, subject)) & set(map(id, about)):
                by, about = "name", subject
        previous = stated.end
        if not about:
            continue
        if evidence == RERUN:  # a value names each of its anchors (`both about 0.92`); a name may be ambiguous
            agree = all if by == "value" else any
            ok = agree(a.observed is not None and agrees(stated, a, a.observed, a.observed, printed=True)
                        for a in about)
            compared = {a.name: a.observed for a in about}
        else:  # no value a passing re-run produced: unsupported (False), or not checked at all (None)
            ok = False if evidence == UNSUPPORTED else None
            compared = {a.name: None for a in about}
        rows.append({"stated": stated.text + ("%" if stated.percent else ""), "metrics": [a.name for a in about],
                     "by": by, "compared_with": compared, "ok": ok})
    return evidence, rows


def number_sentence(evidence: str, row: dict, outcome: str | None = None) -> str:
    """One sentence for a stated number that its evidence does not support."""
    if evidence == UNSUPPORTED:
        names = ", ".join(row["compared_with"])
        return (f"the conclusion states {row['stated']} about {names}, but the clean re-run did not pass"
                + (f" ({outcome})" if outcome else "") + ", so no result it states is supported")
    values = " or ".join(f"{'no value' if v is None else v} for {name}" for name, v in row["compared_with"].items())
    return f"the conclusion states {row['stated']} (matched by {row['by']}), but the clean re-run gave {values}"

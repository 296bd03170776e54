"""The `conclusion-reference` check: the conclusion against the reference conclusion, then against the evidence.

Strict reference match (every number of the expected conclusion present, and most of its content words), then
evidence: every number it states about a result is one the clean re-run produced, which needs a re-run that passed
(a run whose re-run did not pass supports no result; where the task has no clean re-run the numbers are not scored:
`conclusion_numbers.py`), and no claim contradicts the reference's (any Yes/No answer it gives, a negated finding,
a reversed comparison; `claims.py`). Semantic judging of free text is the LLM check's job; this one exists
so harness-validation agents and offline runs get a verdict.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from failatlas.bench_core.scoring.checks.base import CHECKS, VETO, CheckInput, CheckOptions, Verdict
from failatlas.bench_core.scoring.checks.claims import contradiction_sentence, contradictions
from failatlas.bench_core.scoring.checks.conclusion_numbers import NUMBER, check_numbers, number_sentence
from failatlas.bench_core.tasks.model import TaskSpec

if TYPE_CHECKING:
    from failatlas.bench_core.scoring.records import Validation

CONCLUSION_PASS = 0.6
# a conclusion may state at most NUMBER_FACTOR x the reference's numbers + NUMBER_SLACK different numbers, and at
# most WORD_FACTOR x its content words + WORD_SLACK different content words (docs/metrics.md, "Precision")
NUMBER_FACTOR, NUMBER_SLACK = 2, 8
WORD_FACTOR, WORD_SLACK = 3, 30
MAX_CONCLUSION_CHARS = 200_000
MAX_NUMBER_ROWS = 50
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_STOP = frozenset(("the", "and", "for", "with", "that", "this", "than", "are", "was", "were", "has", "have", "from",
                   "into", "not", "but", "its", "can", "all", "any", "per"))


def _numbers(text: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(text)]


def judge_conclusion(task: TaskSpec, conclusion: str | None, validation: Validation | None = None) -> Verdict:
    """The conclusion against the reference (numbers and content words, within the precision limits) and against
    the evidence: the numbers it states about results (the clean re-run's `validation`, else the expected values)
    and the claims of the reference it contradicts; either kind of failure fails C with score 0."""
    if not task.expected_conclusion:
        return Verdict("conclusion", "conclusion-reference", status="not_run",
                       reason="the task has no ground-truth conclusion")
    if not conclusion or not conclusion.strip():
        return Verdict("conclusion", "conclusion-reference", score=0.0, passed=False,
                       error_analysis="The agent wrote no conclusion, so the research question is left unanswered.")
    expected = task.expected_conclusion
    want_numbers = _numbers(expected)
    got_numbers = _numbers(conclusion[:MAX_CONCLUSION_CHARS])
    missing_numbers = [n for n in want_numbers
                       if not any(abs(n - g) <= 0.005 * max(1.0, abs(n)) for g in got_numbers)]
    want_words = {w for w in _WORD.findall(expected.lower()) if w not in _STOP}
    got_words = {w for w in _WORD.findall(conclusion[:MAX_CONCLUSION_CHARS].lower()) if w not in _STOP}
    recall = len(want_words & got_words) / len(want_words) if want_words else 1.0
    number_share = 1 - len(missing_numbers) / len(want_numbers) if want_numbers else 1.0
    stated_numbers = len(set(got_numbers))
    number_limit = NUMBER_FACTOR * len(set(want_numbers)) + NUMBER_SLACK
    word_limit = WORD_FACTOR * len(want_words) + WORD_SLACK
    # a conclusion must commit: stating far more numbers or words than the reference shrinks the score
    precision = min(1.0, number_limit / max(stated_numbers, 1)) * min(1.0, word_limit / max(len(got_words), 1))
    score = (0.5 * recall + 0.5 * number_share) * precision
    too_many_numbers, too_many_words = stated_numbers > number_limit, len(got_words) > word_limit
    passed = not missing_numbers and recall >= CONCLUSION_PASS and not too_many_numbers and not too_many_words
    problems = []
    if missing_numbers:
        problems.append("the conclusion does not report the expected result(s) "
                        + ", ".join(f"{n:g}" for n in missing_numbers))
    if recall < CONCLUSION_PASS:
        problems.append(f"the conclusion does not state the expected finding (content overlap {recall:.0%})")
    if too_many_numbers:
        problems.append(f"the conclusion states {stated_numbers} different numbers where the reference needs "
                        f"{len(set(want_numbers))} (at most {number_limit} accepted), so it commits to no result")
    if too_many_words:
        problems.append(f"the conclusion uses {len(got_words)} different content words where the reference uses "
                        f"{len(want_words)} (at most {word_limit} accepted), so it commits to no finding")
    text = conclusion[:MAX_CONCLUSION_CHARS]
    evidence, numbers = check_numbers(text, task, validation)
    wrong = [row for row in numbers if row["ok"] is False]
    unchecked = [row for row in numbers if row["ok"] is None]
    against = contradictions(expected, task.question, text)
    problems += [number_sentence(evidence, row, validation.outcome if validation else None) for row in wrong[:10]]
    problems += [contradiction_sentence(row) for row in against[:10]]
    verdict = {"missing_numbers": missing_numbers, "word_recall": recall, "numbers_stated": stated_numbers,
               "number_limit": number_limit, "words_stated": len(got_words), "word_limit": word_limit,
               "evidence": evidence if numbers else "none: no number about a result",
               "numbers": (wrong + [row for row in numbers if row["ok"] is not False])[:MAX_NUMBER_ROWS],
               "numbers_checked": len(numbers) - len(unchecked), "numbers_disagreeing": len(wrong),
               "contradictions": against}
    if unchecked:  # no clean re-run to support a result: the claims are not scored, and the verdict says so
        verdict["result_claims"] = (f"not scored: {len(unchecked)} number(s) about results, and "
                                    + ("the task has no clean re-run" if validation is None else
                                       f"its clean re-run is {validation.outcome}"))
    if wrong or against:  # evidence against the conclusion: no LLM opinion overrides it (judges.VETO)
        verdict["reference_score"], score, passed = score, 0.0, False
        verdict[VETO] = True
    return Verdict("conclusion", "conclusion-reference", score=score, passed=passed, verdict=verdict,
                   error_analysis="; ".join(problems))


@CHECKS.register("conclusion-reference")
class ConclusionReferenceJudge:
    name = "conclusion-reference"
    kind = "offline"
    reads = ("rerun",)

    def __init__(self, options: CheckOptions | None = None) -> None:
        self.options = options

    def __call__(self, inp: CheckInput) -> list[Verdict]:
        if "conclusion" not in inp.task.judgeable_phases:
            return []
        return [judge_conclusion(inp.task, inp.outputs.get("conclusion"), inp.validation)]

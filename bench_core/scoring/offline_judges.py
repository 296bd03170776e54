"""Deterministic judges: they need no LLM, so the offline default can score every phase the task allows.

- `design-match`: the agent's design variables against the ground truth by normalised name and role.
- `conclusion-reference`: strict reference match (every number of the expected conclusion present, and most of its
  content words), then evidence: every number it states about a result agrees with the clean re-run's value (the
  expected value where there was no re-run; `conclusion_numbers.py`), and no claim contradicts the reference's
  (a Yes/No answer, a negated finding, a reversed comparison; `claims.py`). Semantic judging of free text is the LLM
  judge's job; this one exists so harness-validation agents and offline runs get a verdict.
- `hidden-tests`: the task's hidden tests of the masked code: assertions, counting and result in a judge process
  on the host that never imports the agent's code; the agent's code runs in a fresh sandbox holding only the
  prepared repository with the agent's diff applied, one worker process per call, plain data back (`hidden/`).
  A pass is checked again with the masked parts restored to their stubs (`counterfactual.py`).
Each returns a `Verdict` with an error analysis in words: what `ingest/` mines. Each is registered in `JUDGES`
under its name, as a judge of kind `offline`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from failatlas.bench_core.hidden import JudgeRun
from failatlas.bench_core.hidden.relay import run_judge_retried
from failatlas.bench_core.prepare.hidden_tests import hidden_test_paths
from failatlas.bench_core.scoring.claims import contradiction_sentence, contradictions
from failatlas.bench_core.scoring.conclusion_numbers import NUMBER, check_numbers, number_sentence
from failatlas.bench_core.scoring.counterfactual import tree_digest
from failatlas.bench_core.scoring.judges import JUDGES, VETO, JudgeInput, JudgeOptions, Verdict
from failatlas.bench_core.tasks.model import DesignSpec, TaskSpec
from failatlas.core.errors import AgentFaultError, InfrastructureError

if TYPE_CHECKING:
    from failatlas.bench_core.scoring.validator import Validation

DESIGN_PASS = 0.8
# at least this share of the design's variables must be true ones (docs/metrics.md, "Precision")
DESIGN_PRECISION_FLOOR = 0.5
CONCLUSION_PASS = 0.6
# a conclusion may state at most NUMBER_FACTOR x the reference's numbers + NUMBER_SLACK different numbers, and at
# most WORD_FACTOR x its content words + WORD_SLACK different content words (docs/metrics.md, "Precision")
NUMBER_FACTOR, NUMBER_SLACK = 2, 8
WORD_FACTOR, WORD_SLACK = 3, 30
MAX_CONCLUSION_CHARS = 200_000
MAX_NUMBER_ROWS = 50
ROLES = ("constant", "independent", "dependent")
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_STOP = frozenset(("the", "and", "for", "with", "that", "this", "than", "are", "was", "were", "has", "have", "from",
                   "into", "not", "but", "its", "can", "all", "any", "per"))


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", str(name).lower())


def judge_design(task: TaskSpec, design: object) -> Verdict:
    if task.design is None:
        return Verdict("design", "design-match", status="not_run", reason="the task has no ground-truth design")
    truth: DesignSpec = task.design
    agent: dict[str, str] = {}
    if isinstance(design, dict):
        for role in ROLES:
            block = design.get(role) or {}
            names = block.keys() if isinstance(block, dict) else block if isinstance(block, list) else []
            for name in names:
                agent[_norm(name)] = role
    rows, matched = [], 0
    problems = []
    seen = set()
    for role, name in truth.variable_names():
        key = _norm(name)
        seen.add(key)
        if key not in agent:
            rows.append({"variable": name, "role": role, "status": "missing"})
            problems.append(f"the {role} variable '{name}' is missing from the design")
        elif agent[key] != role:
            rows.append({"variable": name, "role": role, "status": "misclassified", "agent_role": agent[key]})
            problems.append(f"'{name}' is treated as a {agent[key]} variable but it is {role}")
        else:
            rows.append({"variable": name, "role": role, "status": "matched"})
            matched += 1
    extraneous = [k for k in agent if k not in seen]
    rows += [{"variable": k[:200], "role": agent[k], "status": "extraneous"} for k in extraneous[:50]]
    total = len(truth.variable_names())
    recall = matched / total if total else 0.0
    precision = matched / len(agent) if agent else 0.0
    # extraneous variables may not swamp the true ones: below the floor the score shrinks in proportion
    score = recall * min(1.0, precision / DESIGN_PRECISION_FLOOR) if total else 0.0
    if not isinstance(design, dict):
        problems.insert(0, "The agent wrote no experiment design")
    if extraneous and precision < DESIGN_PRECISION_FLOOR:
        problems.append(f"{len(extraneous)} extraneous variable(s) outnumber the {matched} true one(s) it names "
                        f"(precision {precision:.0%}, at least {DESIGN_PRECISION_FLOOR:.0%} needed)")
    elif extraneous:
        problems.append(f"{len(extraneous)} extraneous variable(s) not in the ground truth")
    analysis = "; ".join(problems)
    return Verdict("design", "design-match", score=score, passed=score >= DESIGN_PASS,
                   verdict={"variables": rows, "threshold": DESIGN_PASS, "recall": recall, "precision": precision,
                            "precision_floor": DESIGN_PRECISION_FLOOR}, error_analysis=analysis)


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
    wrong = [row for row in numbers if not row["ok"]]
    against = contradictions(expected, task.question, text)
    problems += [number_sentence(evidence, row) for row in wrong[:10]]
    problems += [contradiction_sentence(row) for row in against[:10]]
    verdict = {"missing_numbers": missing_numbers, "word_recall": recall, "numbers_stated": stated_numbers,
               "number_limit": number_limit, "words_stated": len(got_words), "word_limit": word_limit,
               "evidence": evidence if numbers else "none: no number about a result",
               "numbers": (wrong + [row for row in numbers if row["ok"]])[:MAX_NUMBER_ROWS],
               "numbers_checked": len(numbers), "numbers_disagreeing": len(wrong), "contradictions": against}
    if wrong or against:  # evidence against the conclusion: no LLM opinion overrides it (judges.VETO)
        verdict["reference_score"], score, passed = score, 0.0, False
        verdict[VETO] = True
    return Verdict("conclusion", "conclusion-reference", score=score, passed=passed, verdict=verdict,
                   error_analysis="; ".join(problems))


StartSandbox = Callable[[dict[str, str]], Any]
Counterfactual = Callable[[], tuple[Any, StartSandbox | None]]


def failure_sentence(failure: dict) -> str:
    """One clean sentence for one failed hidden test, as the error analysis states it."""
    where = f" in {failure['object']}" if failure.get("object") else ""
    message = f": {failure['message']}" if failure.get("message") else ""
    return f"Hidden test {failure['test']} failed with {failure['exception']}{where}{message}".rstrip(". ") + "."


def _sandbox_run(paths: list[Path], start: StartSandbox, task: TaskSpec, pristine: Path | None) -> JudgeRun:
    """The judge's run on the tree `start` starts from; within one scoring batch (`start.memo`), a tree already
    judged (same content, same task) gets that run's result again instead of a second run."""
    memo, tree = getattr(start, "memo", None), getattr(start, "tree", None)
    key = None
    if memo is not None and tree is not None:
        digest = tree_digest(Path(tree))
        key = ("hidden-tests", task.id, digest) if digest else None
        if key in memo:
            return copy.deepcopy(memo[key])
    run = run_judge_retried(paths, lambda: start({}), pristine=pristine,
                            timeout_s=float(task.run.timeout_s) * len(paths))
    if key is not None and not run.problems:
        memo[key] = copy.deepcopy(run)
    return run


def _again(paths: list[Path], task: TaskSpec, pristine: Path | None, tree: Counterfactual | None, what: str,
           passing: str, failing: str) -> dict:
    """The hidden tests again on another tree of the run (`tree()`: its description and a sandbox starter): the
    counterfactual (counterfactual.py, the masked parts restored to their stubs) or the transplant (transplant.py:
    only the agent's masked functions, and what they name, on the pristine masked repository)."""
    if tree is None:
        return {"status": "not_applicable", "note": f"no {what} tree was given to this judge"}
    restored, start = tree()
    if start is None:
        return {"status": "not_applicable", "note": "; ".join(restored.notes)}
    run = _sandbox_run(paths, start, task, pristine)
    return {"status": passing if run.ok else failing, "passed": len(run.passed), "total": run.total,
            "notes": restored.notes[:10]}


def judge_hidden_tests(task: TaskSpec, start_sandbox: StartSandbox | None, *, pristine: Path | None = None,
                       counterfactual: Counterfactual | None = None,
                       transplant: Counterfactual | None = None) -> Verdict:
    """Run the hidden tests in a judge process on the host (`hidden.run_judge`) whose calls run the agent's code
    in a fresh sandbox from `start_sandbox(read_only_inputs)`, which holds the prepared repository with the
    agent's diff applied (None: the diff did not apply); `pristine` is the masked repository without the diff.
    A pass is checked again on the counterfactual tree (`counterfactual()`: its description and a sandbox
    starter, None when not applicable): passing there too fails the phase. Raises InfrastructureError
    (SandboxError) when a sandbox cannot start, JudgeError when the judge itself fails."""
    paths = hidden_test_paths(task)
    if not paths:
        return Verdict("implementation", "hidden-tests", status="not_run", reason="the task has no hidden tests")
    if start_sandbox is None:
        return Verdict("implementation", "hidden-tests", score=0.0, passed=False,
                       error_analysis="The agent's changes could not be applied, so no hidden test could run.")
    run = _sandbox_run(paths, start_sandbox, task, pristine)
    sentences = [failure_sentence(f) for f in run.failures] + [p[0].upper() + p[1:] + "." for p in run.problems]
    total = run.total + len(run.problems)
    verdict: dict = {"passed": len(run.passed), "total": total, "failures": run.failures, "calls": run.calls}
    if run.problems:
        verdict["problems"] = run.problems
    score = len(run.passed) / total if total else 0.0
    if run.ok:
        verdict["counterfactual"] = _again(paths, task, pristine, counterfactual, "counterfactual",
                                           "passed_without_implementation", "failed_as_expected")
        if verdict["counterfactual"]["status"] == "passed_without_implementation":
            sentences.append("The hidden tests also pass with the masked code restored to its stubs, so the pass "
                             "did not come from the implementation.")
            verdict["reported_score"], score = score, 0.0
        else:
            verdict["transplant"] = _again(paths, task, pristine, transplant, "transplant", "passed",
                                           "failed_without_the_rest_of_the_diff")
            if verdict["transplant"]["status"] == "failed_without_the_rest_of_the_diff":
                sentences.append("The hidden tests fail with only the agent's masked functions (and what they name) "
                                 "on the masked repository, so the pass came from code outside them.")
                verdict["reported_score"], score = score, 0.0
    return Verdict("implementation", "hidden-tests", score=score, passed=run.ok and score > 0, verdict=verdict,
                   error_analysis=" ".join(sentences))


class _OfflineJudge:
    kind = "offline"
    needs_sandbox = False
    name = ""

    def __init__(self, options: JudgeOptions | None = None) -> None:
        self.options = options


@JUDGES.register("design-match")
class DesignMatchJudge(_OfflineJudge):
    name = "design-match"

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if "design" not in inp.task.judgeable_phases:
            return []
        return [judge_design(inp.task, inp.outputs.get("design"))]


@JUDGES.register("conclusion-reference")
class ConclusionReferenceJudge(_OfflineJudge):
    name = "conclusion-reference"

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if "conclusion" not in inp.task.judgeable_phases:
            return []
        return [judge_conclusion(inp.task, inp.outputs.get("conclusion"), inp.validation)]


@JUDGES.register("hidden-tests")
class HiddenTestsJudge(_OfflineJudge):
    """Runs only where scoring prepared the clean tree, in a fresh sandbox of its own."""

    name = "hidden-tests"
    needs_sandbox = True

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if not inp.validated:
            return []
        try:
            return [judge_hidden_tests(inp.task, inp.start_sandbox, pristine=inp.pristine,
                                       counterfactual=inp.counterfactual, transplant=inp.transplant)]
        except AgentFaultError as exc:  # what the agent's code caused is its failure, never judge_failed
            return [Verdict("implementation", "hidden-tests", score=0.0, passed=False,
                            verdict={"passed": 0, "total": 1, "failures": [], "problems": [str(exc)]},
                            error_analysis=f"The hidden tests could not run to the end: {exc}.")]
        except (OSError, LookupError, InfrastructureError) as exc:
            return [Verdict("implementation", "hidden-tests", status="judge_failed",
                            reason=f"hidden tests could not run: {exc}")]

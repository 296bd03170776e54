"""The `hidden-tests` check: I from the task's hand-written hidden tests, run by the harness (`evidence/hidden.py`).

Passed only when every test passed on the judged tree and the pass survived: the same tests passing with the masked
code restored to its stubs (the counterfactual) fail the phase, as do tests that fail with only the agent's masked
functions on the masked repository (the transplant, where the judged tree is the agent's own). What the agent's
code broke while the tests ran is its failure; a harness that could not run them records `judge_failed`.
"""

from __future__ import annotations

from failatlas.bench_core.scoring.checks.base import CHECKS, CheckInput, CheckOptions, Verdict, phase_of
from failatlas.bench_core.scoring.evidence.hidden import HiddenRun

NAME = "hidden-tests"


def failure_sentence(failure: dict) -> str:
    """One clean sentence for one failed hidden test, as the error analysis states it."""
    where = f" in {failure['object']}" if failure.get("object") else ""
    message = f": {failure['message']}" if failure.get("message") else ""
    return f"Hidden test {failure['test']} failed with {failure['exception']}{where}{message}".rstrip(". ") + "."


def hidden_verdict(found: HiddenRun) -> Verdict:
    """The verdict of one hidden-test run and its counterfactual and transplant runs."""
    if found.no_tests:
        return Verdict("implementation", NAME, status="not_run", reason="the task has no hidden tests")
    if found.no_tree:
        return Verdict("implementation", NAME, score=0.0, passed=False,
                       error_analysis="The agent's changes could not be applied, so no hidden test could run.")
    run = found.run
    sentences = [failure_sentence(f) for f in run.failures] + [p[0].upper() + p[1:] + "." for p in run.problems]
    total = run.total + len(run.problems)
    verdict: dict = {"passed": len(run.passed), "total": total, "failures": run.failures, "calls": run.calls}
    if run.problems:
        verdict["problems"] = run.problems
    score = len(run.passed) / total if total else 0.0
    if found.counterfactual is not None:
        verdict["counterfactual"] = found.counterfactual
        if found.counterfactual["status"] == "passed_without_implementation":
            sentences.append("The hidden tests also pass with the masked code restored to its stubs, so the pass "
                             "did not come from the implementation.")
            verdict["reported_score"], score = score, 0.0
    if found.transplant is not None:
        verdict["transplant"] = found.transplant
        if found.transplant["status"] == "failed_without_the_rest_of_the_diff":
            sentences.append("The hidden tests fail with only the agent's masked functions (and what they name) "
                             "on the masked repository, so the pass came from code outside them.")
            verdict["reported_score"], score = score, 0.0
    return Verdict("implementation", NAME, score=score, passed=run.ok and score > 0, verdict=verdict,
                   error_analysis=" ".join(sentences))


def unbuilt(found, name: str, what: str, task, fault_verdict: dict) -> list[Verdict] | None:  # noqa: ANN001
    """The verdict of a test run (`found`, its evidence) that did not end as a run: the agent's code broke it
    (`agent_fault`: its failure, never judge_failed), the harness could not run it (`judge_failed`), or it crashed
    on the agent's work (the phase fails); None when it ran."""
    why = found.notes[0] if found.notes else ""
    if found.status == "agent_fault":
        return [Verdict("implementation", name, score=0.0, passed=False, verdict={**fault_verdict, "problems": [why]},
                        error_analysis=f"The {what} could not run to the end: {why}.")]
    if found.status == "failed":
        return [Verdict("implementation", name, status="judge_failed", reason=f"{what} could not run: {why}")]
    if found.status == "crashed":
        return [crashed(phase_of(name, task), name, why)]
    return None


def crashed(phase: str, name: str, why: str, kind: str = "offline") -> Verdict:
    """The verdict of a check whose evidence crashed on the agent's work: its phase fails, with the reason."""
    return Verdict(phase, name, score=0.0, passed=False, verdict={"crashed": True}, kind=kind,
                   error_analysis=f"The {name} judge crashed on the agent's work, so this phase fails: "
                   f"{why.split(':', 1)[0]}.", reason=f"the judge crashed: {why}")


@CHECKS.register(NAME)
class HiddenTestsJudge:
    """Reads the hidden tests' run, where scoring built the clean trees."""

    name = NAME
    kind = "offline"
    reads = ("constructed", "hidden-tests")

    def __init__(self, options: CheckOptions | None = None) -> None:
        self.options = options

    def __call__(self, inp: CheckInput) -> list[Verdict]:
        found = inp.evidence.get("hidden-tests")
        if found is None:
            return []
        not_ran = unbuilt(found, NAME, "hidden tests", inp.task, {"passed": 0, "total": 1, "failures": []})
        if not_ran is not None:
            return not_ran
        return [hidden_verdict(found.payload)]

"""The one reducer: from what the checks returned to what a run records (docs/metrics.md). It never changes a
verdict in place: every rule below makes a new record from the old one, and the checks' own returns stay as they
were.

In order:
1. **Attribution** (`attribute`): where I was decided on the agent's own tree, a masked function its files rebind
   (the `rebinding` evidence) fails a passing hidden-test verdict (`masked_rebound`, `fail`; a `warn` where they
   failed anyway): the pass is not the masked function's.
2. **Consistency**: a passing E beside failing hidden or derived tests is not trusted (`fabricated_result`, a
   `consistency` finding): its results were not produced by a correct implementation of the masked code.
3. **Counterfactual findings**: a warning for each hidden-test pass the counterfactual or transplant undid.
4. **The execution judge** (`settle_execution`): a `not_scored` re-run awaiting the `execution-llm` check becomes
   `passed` or `wrong_value` by its verdict; without one it stays `not_scored`, with the check's reason.

Which verdict of a phase counts, when several checks score it, is decided where scores are read
(`metrics.run_scores`, by `checks.base.judge_precedence`), so every verdict is stored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from failatlas.bench_core.scoring.checks.base import DETERMINISTIC_JUDGES
from failatlas.bench_core.scoring.records import Finding, Validation, Verdict

CONSISTENCY = "results not produced by a correct implementation of the masked code"


@dataclass
class Settled:
    """A run's verdicts, execution verdict and the reducer's findings, as the run records them."""

    verdicts: list[Verdict]
    validation: Validation | None
    findings: list[Finding] = field(default_factory=list)


def attribute(lines: list[str], validation: Validation | None, verdicts: list[Verdict],
              evidence_ids: list[str] | None = None) -> tuple[list[Verdict], Validation | None, list[Finding]]:
    """Rules 1 and 2 (module docstring) on one run: `lines` are the rebindings found in the agent's files (the
    `rebinding` evidence). Returns new verdicts, a new validation and the findings."""
    findings: list[Finding] = []
    read = list(evidence_ids or [])
    # the hidden tests, hand-written or derived from the reference: a failing one decides the consistency rule
    checks = [v for v in verdicts if v.judge in DETERMINISTIC_JUDGES and v.status == "ok"]
    hidden = next((v for v in checks if v.passed is False), checks[0] if checks else None)
    if lines:
        passed = bool(hidden is not None and hidden.passed)
        named = "; ".join(lines[:5]) + (f" (and {len(lines) - 5} more)" if len(lines) > 5 else "")
        findings.append(Finding("masked_rebound", "fail" if passed else "warn",
                                f"I: the agent's code rebinds a masked function, so a pass cannot be attributed "
                                f"to its implementation: {named}", evidence_ids=read))
        if passed:
            failed = dataclasses.replace(
                hidden, passed=False, score=0.0,
                verdict={**hidden.verdict, "rebound": lines[:20], "reported_score": hidden.score},
                error_analysis=(f"{hidden.error_analysis} The hidden tests passed, but the agent's code rebinds a "
                                f"masked function ({named}), so the pass is not the masked function's.").strip(),
                evidence_ids=[*hidden.evidence_ids, *(i for i in read if i not in hidden.evidence_ids)])
            verdicts = [failed if v is hidden else v for v in verdicts]
            hidden = failed
    if hidden is not None and hidden.passed is False and validation is not None and validation.outcome == "passed":
        v = hidden.verdict  # hand-written hidden tests count passed/total, derived ones matched/cases
        done = (v.get("passed", v.get("matched")), v.get("total", v.get("cases")))
        which = "derived tests" if hidden.judge == "derived-tests" else "hidden tests"
        why = f"{CONSISTENCY}: the {which} of the masked code fail" + \
            (f" ({done[0]}/{done[1]} passed)" if None not in done else "")
        if hidden.verdict.get("rebound") or (hidden.verdict.get("counterfactual") or {}).get("status") == \
                "passed_without_implementation" or (hidden.verdict.get("transplant") or {}).get("status") == \
                "failed_without_the_rest_of_the_diff":
            why = f"{CONSISTENCY}: the hidden tests' pass is not the masked code's"
        ids = [*validation.evidence_ids, *(i for i in hidden.evidence_ids if i not in validation.evidence_ids)]
        validation = dataclasses.replace(validation, outcome="fabricated_result",
                                         detail=f"{validation.detail}; not trusted: {why}".lstrip("; "),
                                         evidence_ids=ids)
        findings.append(Finding("consistency", "warn", f"E: {why}", evidence_ids=ids))
    return verdicts, validation, findings


def counterfactual_findings(verdicts: list[Verdict]) -> list[Finding]:
    """A monitor finding for each verdict whose pass did not survive the counterfactual or the transplant."""
    out = []
    for v in verdicts:
        cf = (v.verdict or {}).get("counterfactual") or {}
        if cf.get("status") == "passed_without_implementation":
            out.append(Finding("counterfactual", "warn", f"{v.judge}: the hidden tests also pass with the masked "
                               f"code restored to its stubs ({cf.get('passed')}/{cf.get('total')}), so the pass "
                               "did not come from the implementation", evidence_ids=list(v.evidence_ids)))
        tp = (v.verdict or {}).get("transplant") or {}
        if tp.get("status") == "failed_without_the_rest_of_the_diff":
            out.append(Finding("counterfactual", "warn", f"{v.judge}: the hidden tests fail with only the agent's "
                               f"masked functions on the masked repository ({tp.get('passed')}/{tp.get('total')}), "
                               "so the pass came from code outside them", evidence_ids=list(v.evidence_ids)))
    return out


def settle_execution(validation: Validation | None, verdicts: list[Verdict]) -> Validation | None:
    """Rule 4 (module docstring): the validation once the `execution-llm` check has spoken, as a new record."""
    if validation is None or not validation.awaiting_judge:
        return validation
    verdict = next((x for x in verdicts if x.phase == "execution"), None)
    if verdict is None:
        return validation
    if verdict.status != "ok" or verdict.passed is None:
        reason = verdict.reason or verdict.status
        return dataclasses.replace(validation, detail=f"{validation.detail}; the judge did not decide: {reason}")
    analysis = f": {verdict.error_analysis}" if verdict.error_analysis else ""
    return dataclasses.replace(
        validation, outcome="passed" if verdict.passed else "wrong_value", awaiting_judge=False,
        detail=(f"the {verdict.judge} judge found the re-run's output "
                f"{'consistent' if verdict.passed else 'inconsistent'} with the expected outcome{analysis}"),
        evidence_ids=[*validation.evidence_ids, *(i for i in verdict.evidence_ids if i not in validation.evidence_ids)])


def settle(validation: Validation | None, verdicts: list[Verdict], *, rebinding: list[str] | None = None,
           rebinding_ids: list[str] | None = None, attributed: bool = False) -> Settled:
    """Every rule of the module docstring on one run's checks' returns. `attributed`: the run has clean trees, so
    rules 1-3 apply (`rebinding`: the lines of its `rebinding` evidence)."""
    findings: list[Finding] = []
    if attributed:
        verdicts, validation, found = attribute(rebinding or [], validation, verdicts, rebinding_ids)
        findings += counterfactual_findings(verdicts) + found
    return Settled(verdicts, settle_execution(validation, verdicts), findings)

"""A run's failures as statements with facets, one per failure, from the structured results the harness stored:
the validator's outcome and logs, the judges' verdicts (per design variable, per hidden test, per requirement step),
the monitor's rules. Free text (an LLM judge's error analysis) is split into sentences and given the kind its phase
and words allow (ingest/infer.py)."""

from __future__ import annotations

import json
import math
from typing import Any

from failatlas.ingest.evidence import RunEvidence
from failatlas.ingest.failures import Exc, Statement, classify, hidden_statements, read_exception
from failatlas.ingest.infer import infer_facets
from failatlas.ingest.sentences import error_sentences

# rule -> (kind, object, statement)
MONITOR_RULES: dict[str, tuple[str, str | None, str]] = {
    "ground_truth_access": ("monitor_violation", "ground-truth access",
                            "The agent accessed ground-truth files it must not read"),
    "git_history": ("monitor_violation", "git history",
                    "The agent read the repository's git history, where answers may be found"),
    "network": ("monitor_violation", "network", "The agent used the network where it was not allowed"),
    "test_infrastructure": ("monitor_violation", "test infrastructure",
                            "The agent's change reaches into the hidden tests' runner"),
    "fabricated_results": ("result_not_produced", None, "The agent reported results it did not produce"),
    "results_not_reproduced": ("result_not_produced", None,
                               "The agent's results file holds values its final code does not produce"),
}
NO_DESIGN = "The agent wrote no experiment design"
NO_CONCLUSION = "The agent wrote no conclusion"
# the conclusion check's evidence and sentence for numbers stated where the clean re-run did not pass
# (bench_core/scoring/checks/conclusion_numbers.py; ingest reads stored verdicts, not the scoring package)
UNSUPPORTED_EVIDENCE = "no passing re-run"
RERUN_NOT_PASSED = "but the clean re-run did not pass"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _loads(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def free_text(phase: str, text: str | None, **fixed: Any) -> list[Statement]:
    """The error sentences of free text, each with the kind its phase and words give (or `fixed` kind/object)."""
    out = []
    for sentence in error_sentences(text):
        kind, obj = infer_facets(phase, sentence)
        out.append(Statement(fixed.get("kind", kind), fixed.get("object", obj), sentence))
    return out


# -- design ----------------------------------------------------------------------------------------------------
def _variable_rows(verdict: Any) -> list[dict[str, Any]] | None:
    if not isinstance(verdict, dict):
        return None
    rows = verdict.get("variables")
    samples = verdict.get("samples")
    if rows is None and isinstance(samples, list) and samples and isinstance(samples[0], dict):
        rows = samples[0].get("variables")  # an LLM judge: its first sample's table
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else None


def design_statements(judgement: dict[str, Any]) -> list[Statement]:
    """One statement per ground-truth variable missing or given the wrong role; "no design written" when the agent
    wrote none. Extraneous variables are not failures (the judge's score ignores them)."""
    analysis = judgement.get("error_analysis") or ""
    if analysis.startswith(NO_DESIGN):
        return [Statement("design_missing", "design", "No experiment design written")]
    rows = _variable_rows(_loads(judgement.get("verdict")))
    if rows is None:
        return free_text("design", analysis)
    out = []
    for row in rows:
        name = str(row.get("variable") or row.get("name") or "").strip()
        if not name:
            continue
        if row.get("status") == "missing":
            out.append(Statement("design_variable", name, f"Design variable `{name}` missing",
                                 {"role": row.get("role")}))
        elif row.get("status") == "misclassified":
            agent_role = row.get("agent_role")
            role = row.get("role")
            text = (f"Design variable `{name}` treated as {agent_role} instead of {role}" if agent_role
                    else f"Design variable `{name}` given the wrong role (it is {role})")
            out.append(Statement("design_variable", name, text, {"role": role, "agent_role": agent_role}))
    return out


# -- conclusion ------------------------------------------------------------------------------------------------
def conclusion_statements(judgement: dict[str, Any], no_conclusion: bool) -> list[Statement]:
    analysis = judgement.get("error_analysis") or ""
    if no_conclusion or analysis.startswith(NO_CONCLUSION):
        return [Statement("conclusion_missing", "conclusion", "No conclusion written")]
    verdict = _loads(judgement.get("verdict"))
    if judgement.get("judge") == "conclusion-reference" and isinstance(verdict, dict):
        out = []
        if verdict.get("missing_numbers"):
            out.append(Statement("conclusion_unsupported", "conclusion",
                                 "Conclusion does not report the expected results",
                                 {"missing_numbers": verdict["missing_numbers"]}))
        if "does not state the expected finding" in analysis:
            out.append(Statement("conclusion_unsupported", "conclusion",
                                 "Conclusion does not state the expected finding",
                                 {"word_recall": verdict.get("word_recall")}))
        if out:
            return out
    statements = free_text("conclusion", analysis, kind="conclusion_unsupported")
    if isinstance(verdict, dict) and verdict.get("evidence") == UNSUPPORTED_EVIDENCE:
        for statement in statements:  # a number no passing re-run could support: the run's failure left it so
            if RERUN_NOT_PASSED in statement.text:
                statement.detail = {**statement.detail, "rerun_not_passed": True}
    return statements


# -- implementation --------------------------------------------------------------------------------------------
# the judges whose verdicts list failed tests (`failures`: test, exception, object, message): the hand-written hidden
# tests and those derived from the reference's recorded calls
TEST_JUDGES = ("hidden-tests", "derived-tests")


def implementation_statements(judgement: dict[str, Any], evidence: RunEvidence, *, fabricated: bool,
                              rerun: Statement | None = None) -> list[Statement]:
    """Hidden tests: one statement per distinct failure; an LLM judge: one per requirement step not implemented.
    In a run whose results the clean re-run did not produce (`fabricated`), the failing tests are the evidence of
    that one failure, not failures of their own. `rerun`: the clean re-run's failure, for tests that only ran it."""
    verdict = _loads(judgement.get("verdict"))
    verdict = verdict if isinstance(verdict, dict) else {}
    analysis = judgement.get("error_analysis") or ""
    if judgement.get("judge") in TEST_JUDGES:
        if analysis.startswith("The agent's changes could not be applied"):
            return [Statement("no_output", "diff", "Code change could not be applied to the repository")]
        if verdict.get("not_trusted"):
            return [Statement("monitor_violation", None, "Hidden-test results not trusted: the change reaches into "
                              "the test runner", {"not_trusted": verdict["not_trusted"]})]
        failures = [*_list(verdict.get("failures")), *_list(verdict.get("problems"))]
        if isinstance(failures, list) and failures:
            found = hidden_statements(failures, evidence, rerun)
            if fabricated:
                return [Statement("result_not_produced", evidence.task.results_file,
                                  "Results reported while the code under test fails its hidden tests",
                                  {"hidden_tests": [s.text for s in found]})]
            return found
    steps = verdict.get("steps")
    if isinstance(steps, dict) and analysis.startswith("step not implemented: "):
        return [Statement("unimplemented", f"step {n}", f"Requirement step not implemented: {text}")
                for n, text in _missing_steps(analysis)]
    return free_text("implementation", analysis)


def _missing_steps(analysis: str) -> list[tuple[int, str]]:
    parts = [p.removeprefix("step not implemented: ").strip() for p in analysis.split("; step not implemented: ")]
    return [(n, p) for n, p in enumerate(parts, 1) if p]


# -- execution -------------------------------------------------------------------------------------------------
def _percent_off(observed: Any, expected: Any) -> str | None:
    try:
        obs, exp = float(observed), float(expected)
    except (TypeError, ValueError, OverflowError):  # a number too large for a float says nothing in percent
        return None
    if not (math.isfinite(obs) and math.isfinite(exp)):
        return "not a finite number" if not math.isfinite(obs) else None
    if exp == 0:
        return None
    off = abs(obs - exp) / abs(exp) * 100
    if off >= 1000:
        return f"{off / 100:.0f} times off"
    return f"{off:.2g}% off" if off < 10 else f"{off:.0f}% off"


def metric_statements(metrics: Any) -> list[Statement]:
    """One statement per expected value the re-run missed or did not report."""
    out = []
    if not isinstance(metrics, dict):
        return out
    for name, row in sorted(metrics.items()):
        if not isinstance(row, dict) or row.get("ok") is not False:
            continue
        observed, expected = row.get("observed"), row.get("expected")
        detail = {"observed": observed, "expected": expected, "rtol": row.get("rtol"), "atol": row.get("atol")}
        if observed is None:
            out.append(Statement("no_output", name, f"Metric `{name}` was not reported", detail))
            continue
        off = _percent_off(observed, expected)
        text = (f"Metric `{name}` is {off} its expected value" if off and off.endswith("off")
                else f"Metric `{name}` is {off}" if off else f"Metric `{name}` differs from its expected value")
        out.append(Statement("wrong_value", name, text, detail))
    return out


_OUTCOME_STATEMENTS = {
    "timeout": ("budget_exhausted", "The clean re-run did not finish within the time limit"),
    "oom": ("budget_exhausted", "The clean re-run ran out of memory"),
    "patch_failed": ("no_output", "Code change could not be applied to the repository"),
    "not_run": ("no_output", "No run command or run script to re-run the experiment"),
}


def validation_statements(validation: dict[str, Any], evidence: RunEvidence) -> list[Statement]:
    """The clean re-run's failure: one statement for a crash, a missing part or package, a budget or a fabricated
    result (the exception that ended the re-run decides); one per metric for wrong values."""
    outcome = validation["outcome"]
    log = "\n".join(x for x in (validation.get("stdout_tail"), validation.get("stderr_tail")) if x)
    exc = read_exception(validation.get("stderr_tail")) or read_exception(validation.get("stdout_tail"))
    base = {"outcome": outcome, "exit_code": validation.get("exit_code"), "log_line": exc.line if exc else None}
    if outcome == "fabricated_result":
        target = evidence.task.results_file or "results"
        return [Statement("result_not_produced", target,
                          f"Results in `{target}` were carried in the change, not produced by the code",
                          {**base, "rerun_exception": exc.name if exc else None})]
    if outcome == "wrong_value":
        found = metric_statements(_loads(validation.get("metrics")))
        return [_with(s, base) for s in found] or [
            Statement("wrong_value", None, "The re-run's output does not match the expected outcome",
                      {**base, "detail": validation.get("detail")})]
    if outcome in _OUTCOME_STATEMENTS and not (outcome == "timeout" and exc and exc.name):
        kind, text = _OUTCOME_STATEMENTS[outcome]
        return [Statement(kind, None, text, {**base, "detail": validation.get("detail")})]
    if exc is None:
        kind = "unknown" if outcome == "env_setup" else "crash"
        code = validation.get("exit_code")
        return [Statement(kind, None, f"The clean re-run failed with exit code {code} and no error message"
                          if code is not None else "The clean re-run failed with no error message", base)]
    statement = classify(exc, evidence, where="the clean re-run")
    return [_with(statement, {**base, "log": log[-2000:]})]


def _with(statement: Statement, detail: dict[str, Any]) -> Statement:
    statement.detail = {**detail, **statement.detail}
    return statement


# -- monitor ---------------------------------------------------------------------------------------------------
def monitor_statements(finding: dict[str, Any]) -> list[Statement]:
    fixed = MONITOR_RULES.get(finding["rule"])
    if fixed:
        return [Statement(fixed[0], fixed[1], fixed[2], {"evidence": (finding.get("evidence") or "")[:500]})]
    return free_text("monitor", finding.get("evidence"))


__all__ = ["Exc", "Statement", "conclusion_statements", "design_statements", "implementation_statements",
           "metric_statements", "monitor_statements", "validation_statements"]

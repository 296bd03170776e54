"""The `derived-tests` check: I from hidden tests derived from the reference, for every task with masked functions
whose reference command runs, hand-written hidden tests or not (AutoExperiment, EXP-Bench, RExBench have none).

It reads two pieces of evidence: the replay of the reference's recorded calls on the agent's definitions in the
judged tree (`derived-replay`, `evidence/replay.py`), and the calls of the masked functions that E's own re-run made
(`rerun`, observed with the recording's targets: `hidden/observe.py`), which a function cannot tell from the
experiment. Passed only when every replayed call gave the reference's result and the run's calls agree with the
reference's (docs/metrics.md, "Derived tests").
"""

from __future__ import annotations

import dataclasses

from failatlas.bench_core.hidden import JudgeRun
from failatlas.bench_core.hidden.observe import Agreement, agreement
from failatlas.bench_core.hidden.record import Recording, test_id
from failatlas.bench_core.scoring.checks.base import CHECKS, CheckInput, CheckOptions, Verdict
from failatlas.bench_core.scoring.checks.hidden_tests import unbuilt
from failatlas.bench_core.scoring.evidence.calls import summary as calls_summary
from failatlas.bench_core.scoring.evidence.replay import Replayed

NAME = "derived-tests"


def _not_run(reason: str, **verdict) -> Verdict:
    return Verdict("implementation", NAME, status="not_run", reason=reason, verdict=verdict)


def _counts(recording: Recording) -> dict:
    return {"recorded": len(recording.cases) - recording.perturbed, "perturbed": recording.perturbed,
            "skipped_unencodable": recording.unencodable, "skipped": dict(recording.skipped),
            "unreproducible": recording.unreproducible, "stub_passes": recording.stub_passes,
            "calls_seen": recording.calls_seen}


def verdict_of(recording: Recording, key: str, run: JudgeRun, in_run: Agreement | str = "") -> Verdict:
    """The verdict of one replay and of E's observed re-run (`in_run`: how its calls agree with the reference's,
    or why they were not checked): passed only when every case matched and the run's calls agree; the score is
    the share of replayed and observed calls that gave the reference's results."""
    cases = {c["id"]: c for c in recording.cases}
    passed = {test_id(n) for n in run.passed} & set(cases)
    functions: dict[str, dict] = {}
    for case in recording.cases:
        row = functions.setdefault(case["qualname"], {"cases": 0, "matched": 0, "first_failure": None})
        row["cases"] += 1
        row["matched"] += case["id"] in passed
    for failure in run.failures:
        case = cases.get(test_id(failure["test"]) or "")
        row = functions.get(case["qualname"]) if case else None
        if row is not None and row["first_failure"] is None:
            where = f" in {failure['object']}" if failure.get("object") else ""
            text = failure.get("message") or ""
            row["first_failure"] = (text if failure["exception"] == "AssertionError"
                                    else f"{failure['exception']}{where}: {text}".rstrip(": "))[:300]
    total = len(recording.cases)
    ok = run.ok and len(passed) == total
    agreed, checked = len(passed), total
    sentences = []
    for name, row in functions.items():
        if row["matched"] < row["cases"]:
            first = f"; first difference: {row['first_failure']}" if row["first_failure"] else ""
            sentences.append(f"Derived tests of {name}: {row['matched']} of {row['cases']} calls recorded from the "
                             f"reference give the reference's result{first}.")
    sentences += [p[0].upper() + p[1:] + "." for p in run.problems]
    if isinstance(in_run, Agreement):
        failures = in_run.failures()
        ok = ok and not failures
        sentences += [f"{text}." for text in failures]
        agreed, checked = agreed + in_run.agreed, checked + in_run.checked
    score = agreed / checked if checked else 0.0
    verdict = {"recording": key, "cases": total, "matched": len(passed), **_counts(recording),
               "functions": functions, "failures": run.failures[:50], "calls": run.calls,
               "in_run": in_run.summary() if isinstance(in_run, Agreement) else {"checked": False, "reason": in_run}}
    if run.problems:
        verdict["problems"] = run.problems
    return Verdict("implementation", NAME, score=score, passed=ok, verdict=verdict, error_analysis=" ".join(sentences))



def in_run(recording: Recording, validation) -> Agreement | str:
    """How E's re-run (`validation`) agrees with the reference's recorded calls, or why that was not checked."""
    if validation is None:
        return "the task has no execution phase, so no run of its command was observed"
    if (validation.evidence or {}).get("tree") == "script":
        return "E re-ran the agent's own script, whose calls are not the reference's"
    if validation.observed is None:
        return (f"E's re-run ({validation.outcome}) was not observed: it did not run the task's command, or no "
                "recording of the reference's calls could be made before it ran")
    if not any(not c["perturbed"] for c in recording.cases):
        return "only perturbed calls of the reference were kept, and a run makes none of those"
    return agreement(recording.cases, validation.observed)


def with_calls(verdict: Verdict, calls: dict | None) -> Verdict:
    """`verdict` with the drawn calls of E's re-run (`evidence/calls.py`): a call the reference, replayed on that
    call's inputs, answers otherwise fails I, and the score then counts the drawn calls among the calls checked."""
    if calls is None or not (calls.get("functions") or calls.get("missing") or calls.get("foreign")):
        return verdict
    rows = calls.get("functions") or {}
    body = {**verdict.verdict, "drawn_calls": {"secret": calls["secret"], "functions": rows,
                                               "unchecked": calls.get("unchecked", {}),
                                               "missing": calls.get("missing", {}),
                                               "foreign": calls.get("foreign", 0)}}
    differing = calls_summary(calls)
    if not differing:
        return dataclasses.replace(verdict, verdict=body)
    checked = sum(r["checked"] for r in rows.values())
    agreed = sum(r["agreed"] for r in rows.values())
    cases = (verdict.verdict.get("cases") or 0) if verdict.status == "ok" else 0
    total = cases + checked
    score = ((verdict.score or 0.0) * cases + agreed) / total if total else 0.0
    analysis = " ".join([verdict.error_analysis if verdict.status == "ok" else "", *(f"{s}." for s in differing)])
    return Verdict("implementation", NAME, score=score, passed=False, verdict=body, error_analysis=analysis.strip())


def derived_verdict(replayed: Replayed, validation) -> Verdict:  # noqa: ANN001 - records.Validation
    """The verdict of one replay (`replayed`) and of E's observed re-run (`validation`)."""
    if replayed.not_run:
        extra = {"recording": replayed.key, **_counts(replayed.recording)} if replayed.recording is not None else {}
        return _not_run(replayed.not_run, **extra)
    if replayed.no_tree:
        return Verdict("implementation", NAME, score=0.0, passed=False,
                       error_analysis="The agent's changes could not be applied, so no derived test could run.")
    return verdict_of(replayed.recording, replayed.key, replayed.run, in_run(replayed.recording, validation))


@CHECKS.register(NAME)
class DerivedTestsJudge:
    """Reads the derived replay and E's observed re-run, where scoring built the clean trees."""

    name = NAME
    kind = "offline"
    reads = ("constructed", "recording", "derived-replay", "rerun", "calls")

    def __init__(self, options: CheckOptions | None = None) -> None:
        self.options = options

    def __call__(self, inp: CheckInput) -> list[Verdict]:
        found = inp.evidence.get("derived-replay")
        if found is None:
            return []
        not_ran = unbuilt(found, NAME, "derived tests", inp.task, {"passed": 0, "total": 1})
        if not_ran is not None:
            return not_ran
        verdict = derived_verdict(found.payload, inp.validation)
        return [with_calls(verdict, inp.evidence.payload("calls"))]


def judge_derived(task, start_sandbox, reference, *, folder, validation=None) -> Verdict:  # noqa: ANN001
    """The replay (`evidence.replay.replay_derived`) and its verdict in one call, for a caller holding a sandbox
    starter. Raises what the replay raises."""
    from failatlas.bench_core.scoring.evidence.replay import replay_derived

    return derived_verdict(replay_derived(task, start_sandbox, reference, folder=folder), validation)

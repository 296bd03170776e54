"""The execution check: E decided on the clean re-run's evidence (docs/metrics.md, "How E is decided").

It reads the re-run (`rerun`: what the task's command, or the agent's script where E is script-attributed, printed
and left), compares it with what the task expects through the task's E rules (`erules/`: all that apply must
pass; none applying is `not_scored`, never `passed`), and, after a pass, reads what could make that pass not the
implementation's: an expected value written literally by what the judged tree carries of the agent's (`literals`
on the agent's tree, `carried-literals` on a constructed one: `fabricated_result`), and the counterfactual re-run
(`counterfactual-rerun`): passing there too, on a constructed tree the task's check does not depend on the masked
code (`not_scored`), on the agent's tree its results did not come from the implementation (`fabricated_result`).
A passing E beside failing hidden tests is settled by the reducer (`settle.py`), not here.
"""

from __future__ import annotations

import re

from failatlas.bench_core.scoring import erules
from failatlas.bench_core.scoring.checks.base import Checked, CheckInput
from failatlas.bench_core.scoring.erules.base import judge_excerpt
from failatlas.bench_core.scoring.evidence.build import RerunEvidence, seen_of
from failatlas.bench_core.scoring.evidence.rerun import TAIL, Rerun, own_module_missing
from failatlas.bench_core.scoring.records import Finding, Validation
from failatlas.bench_core.tasks.model import TaskSpec

NAME = "execution"
READS = ("constructed", "answer-reader", "rerun", "literals", "carried-literals", "rerun-counterfactual")
ENV_SETUP = re.compile(r"ModuleNotFoundError|No module named|ImportError|command not found|"
                       r"cannot open shared object file|DistributionNotFound|not installed")


def classify_failure(result, results_in_diff: bool, *, own_modules: frozenset[str] | set[str] = frozenset()) -> str:
    """Outcome code of a failed re-run. A missing module of the repository itself is a runtime error (a missing
    component), not an environment problem; a missing third-party package is `env_setup`."""
    if result.timed_out or result.killed_reason == "timeout":
        return "timeout"
    if result.killed_reason == "oom" or result.returncode == 137:
        return "oom"
    if results_in_diff:
        return "fabricated_result"
    text = (result.stderr or "") + (result.stdout or "")
    if own_module_missing(text, own_modules):
        return "runtime_error"
    if ENV_SETUP.search(text):
        return "env_setup"
    return "runtime_error"


def decide(task: TaskSpec, given: RerunEvidence) -> Validation:
    """The outcome of one re-run (`given`): how it ended, and what the task's E rules say of what it left."""
    done: Rerun = given.done
    if done.status == "patch_failed":
        return Validation("patch_failed", detail=done.detail)
    if done.status == "not_run":
        return Validation("not_run", detail=done.detail)
    if done.status == "unusable":
        return Validation("runtime_error", detail=done.detail)
    if done.status == "agent_fault":
        return Validation("runtime_error", command=done.command, detail=done.detail, observed=done.observed)
    result = done.result
    results_in_diff = task.run.results_file in done.carried
    v = Validation("passed", command=done.command, exit_code=result.returncode, duration_s=result.duration_s,
                   stdout_tail=done.stdout[-TAIL:], stderr_tail=done.stderr[-TAIL:], results_in_diff=results_in_diff,
                   observed=done.observed)
    if not result.success:
        v.outcome = classify_failure(result, results_in_diff, own_modules=done.own_modules)
        v.detail = f"the re-run exited with {result.returncode}"
        return v
    try:
        combined = erules.compare_all(task, seen_of(task, given))
    except (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError, LookupError, OSError) as exc:
        # what the agent's code produced cannot be read or compared (a 5000-digit integer, nesting past any
        # depth): the agent's failure, never an exception that stops scoring
        v.outcome = "wrong_value"
        v.detail = f"the re-run's output cannot be compared: {type(exc).__name__}: {str(exc)[:300]}"
        return v
    v.outcome, v.detail, v.metrics, v.awaiting_judge = (combined.outcome, combined.detail, combined.metrics,
                                                        combined.awaiting_judge)
    if v.awaiting_judge:
        v.judge_output = judge_excerpt(done.stdout, done.stderr)
    return v


def _named(written: list[tuple[str, str, float]]) -> str:
    return ", ".join(sorted({f"{name} ({value:g}) in {path}" for path, name, value in written})[:5])


def check_execution(inp: CheckInput) -> Checked:
    """The execution verdict and its findings (module docstring); nothing when the task has no re-run."""
    ev = inp.evidence
    given: RerunEvidence | None = ev.payload("rerun")
    if given is None:
        return Checked()
    task = inp.task
    findings: list[Finding] = []
    v = decide(task, given)
    trees = ev.payload("constructed")
    script = given.script
    v.evidence = {"tree": "script" if script else trees.constructed.attribution,
                  **({} if script or trees.constructed is None else trees.constructed.evidence())}
    reader_ev = ev.get("answer-reader")
    if given.reader is not None and not script:
        v.evidence["reader"] = reader_ev.observed.get("locators", [])
    no_reader = (reader_ev.payload or (None, ""))[1] if reader_ev is not None else ""
    if no_reader:
        v.evidence["notes"] = [no_reader]
    read = ["constructed", "answer-reader", "rerun"]
    if v.outcome == "passed":
        literal_id = "literals" if script else "carried-literals"
        written, notes = ev.payload(literal_id) or ([], [])
        read.append(literal_id)
        if notes and not script:  # the carried scan's caps and errors, as the agent's-tree scan's are
            v.detail = "; ".join([v.detail or "", *notes]).lstrip("; ")
        if written:
            v.outcome = "fabricated_result"
            whose = "files write" if script else "code the judged tree carries writes"
            v.detail += f"; not trusted: the agent's {whose} expected values literally: {_named(written)}"
        else:
            again: RerunEvidence | None = ev.payload("rerun-counterfactual")
            read.append("rerun-counterfactual")
            restored = again.restored if again is not None else None
            if again is None or again.done.status == "not_run" and restored is not None and restored.path is None:
                notes = restored.notes if restored is not None else []
                if notes and "cannot be built" in notes[0]:
                    v.outcome = "fabricated_result"
                    v.detail += f"; not trusted: {notes[0]}"
                    findings.append(Finding("counterfactual", "warn", f"E: {notes[0]}"))
            elif decide(task, again).outcome == "passed":
                if not script and trees.from_pristine:
                    v.outcome = "not_scored"
                    v.detail = (f"{v.detail}; not scored: the task's command passes its checks with every masked "
                                "part left as its stub, so its checks do not depend on the implementation")
                else:
                    why = ("the re-run also passes with the masked code restored to its stubs, so its results did "
                           "not come from the implementation")
                    v.outcome = "fabricated_result"
                    v.detail = f"{v.detail}; {why}"
                    findings.append(Finding("counterfactual", "warn", f"E: {why}" + (
                        f" ({'; '.join(restored.notes)})" if restored.notes else "")))
    _, scan_notes = ev.payload("literals") or ([], [])
    if scan_notes:
        v.detail = "; ".join([v.detail or "", *scan_notes]).lstrip("; ")
    v.evidence_ids = ev.ids(*read, "literals")
    for f in findings:
        f.evidence_ids = v.evidence_ids
    return Checked(findings=findings, validation=v)


def validate(task: TaskSpec, outputs: dict, *, workspace, patch_error: str | None, sandbox_backend: str,
             spec_fields: dict, reader=None, watch=None) -> Validation:  # noqa: ANN001
    """One clean re-run of `outputs` on `workspace` and its outcome (no counterfactual, no literal scan): the
    re-run's evidence (`evidence.rerun.rerun`) decided by `decide`. `reader`: read the task's own command where
    the reference's run showed its values, instead of the agent's script."""
    from failatlas.bench_core.scoring.evidence.rerun import rerun

    done = rerun(task, outputs, workspace=workspace, patch_error=patch_error, sandbox_backend=sandbox_backend,
                 spec_fields=spec_fields, use_script=reader is None, wanted=erules.wanted_files(task, reader),
                 watch=watch)
    return decide(task, RerunEvidence(done, reader is None, outputs, reader))

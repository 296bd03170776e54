"""The execution validator: re-execute a run in a clean sandbox and accept only results that re-run produced.

Never the agent's own sandbox: start from a freshly prepared masked repository, apply the agent's diff, delete any
results or check file the diff carried, run the task's command (or the agent's run script) under a deadline in a
sandbox of its own (closed after the run; the hidden tests get another), then compare what the re-run produced with
everything the task expects (`comparisons`): its metrics (from the results file or the last JSON object printed),
its success criterion, the user's checks, or the numbers of its expected outcome. All must pass. A re-run that
succeeds with nothing to compare is `not_scored`, never `passed`; so is one whose expected outcome is prose, until
the `execution-llm` judge decides it (`settle`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.agents.base import OUTPUT_DIR, RUN_SCRIPT
from failatlas.bench_core.hidden.observe import Observed, Watch, collect, install
from failatlas.bench_core.scoring.comparisons import (
    Compared,
    claimed_results,
    compare_metrics,
    disagreements,
    from_checks,
    from_expected_outcome,
    from_results_file,
    from_stdout_json,
    isclose,
    judge_excerpt,
)
from failatlas.bench_core.scoring.reference_answer import from_reader
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import AgentFaultError, HarnessSetupError, InfrastructureError, InputError
from failatlas.core.paths import remove_inside

OUTCOMES = ("passed", "wrong_value", "runtime_error", "timeout", "oom", "env_setup", "patch_failed", "not_run",
            "fabricated_result", "not_scored")
# the outcomes that are neither a pass nor a failure: E is not scored ("–")
UNSCORED_OUTCOMES = frozenset({"not_scored"})
ENV_SETUP = re.compile(r"ModuleNotFoundError|No module named|ImportError|command not found|"
                       r"cannot open shared object file|DistributionNotFound|not installed")
TAIL = 4000
# when comparisons fail in different ways, the most telling outcome is reported
_SEVERITY = {"fabricated_result": 3, "runtime_error": 2, "wrong_value": 1}

__all__ = ["OUTCOMES", "TAIL", "UNSCORED_OUTCOMES", "Validation", "apply_diff", "claimed_results",
           "classify_failure", "clean_trees", "compare_metrics", "disagreements", "isclose", "patched_workspace",
           "settle", "validate"]


@dataclass
class Validation:
    """One clean re-run and its outcome (one of OUTCOMES), as `validations` stores it. `awaiting_judge`: the
    outcome is `not_scored` until the `execution-llm` judge compares `judge_output` (the end of the re-run's output,
    not stored) with the expected outcome."""

    outcome: str
    command: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    metrics: dict = field(default_factory=dict)
    detail: str = ""
    results_in_diff: bool = False
    awaiting_judge: bool = False
    judge_output: str = field(default="", repr=False)
    # what the re-run was decided on (`constructed.Constructed.evidence`): its `tree` (constructed, diff, script),
    # what of the agent's was carried into it and what was left out
    evidence: dict = field(default_factory=dict)
    # the masked functions' calls the re-run made (`hidden.observe`), when it was observed; the derived-tests
    # judge compares them with the reference's (not stored: the judge's verdict says what they showed)
    observed: Observed | None = field(default=None, repr=False)


def apply_diff(workspace: Path, diff: str) -> str | None:
    """Apply a git diff to `workspace`; returns an error message, or None on success."""
    if not diff.strip():
        return None
    proc = subprocess.run(["git", "apply", "--binary", "--whitespace=nowarn", "-"], cwd=workspace,
                          input=diff.encode(), capture_output=True)
    return proc.stderr.decode(errors="replace")[-TAIL:] if proc.returncode else None


MISSING_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")


def _own_modules(workspace: Path | None) -> set[str]:
    """Top-level module names the repository itself provides or should provide (masked files included)."""
    if workspace is None or not workspace.is_dir():
        return set()
    return {p.stem for p in workspace.glob("*.py")} | {p.name for p in workspace.iterdir() if p.is_dir()}


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
    missing = [m.split(".")[0] for m in MISSING_MODULE.findall(text)]
    if missing and all(m in own_modules for m in missing):
        return "runtime_error"
    if ENV_SETUP.search(text):
        return "env_setup"
    return "runtime_error"


def patched_workspace(task: TaskSpec, diff: str, *, scratch: Path, repo: Path | None = None
                      ) -> tuple[Path, str | None]:
    """Prepare the masked repository afresh in `scratch` and apply the agent's diff to it: the clean tree that the
    validator and the hidden tests start from. Returns the tree and git apply's error (None when it applied)."""
    workspace, _pristine, error = clean_trees(task, diff, scratch=scratch, repo=repo)
    return workspace, error


def clean_trees(task: TaskSpec, diff: str, *, scratch: Path, repo: Path | None = None
                ) -> tuple[Path, Path, str | None]:
    """`patched_workspace`, plus a copy of the masked repository without the diff (`scratch/pristine`): the
    hidden tests' trusted helpers and the counterfactual's source. Returns (tree, pristine, git apply's error)."""
    from failatlas.bench_core.prepare import prepare_workspace

    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    workspace = Path(prepare_workspace(task, scratch / "workspace", repo=repo).path)
    pristine = scratch / "pristine"
    shutil.copytree(workspace, pristine, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    return workspace, pristine, apply_diff(workspace, diff)


def _place_run_script(workspace: Path, script: str) -> None:
    """Put the agent's stored run script where `bash RUN_SCRIPT` finds it: the diff never carries OUTPUT_DIR."""
    remove_inside(workspace, OUTPUT_DIR, field="run_script")
    (workspace / OUTPUT_DIR).mkdir()
    (workspace / RUN_SCRIPT).write_text(script)


def _remove_outputs(task: TaskSpec, workspace: Path, changed: set[str]) -> set[str]:
    """Delete the results file and every check's file from the clean tree (only what the re-run writes counts);
    returns those the agent's diff carried. Raises InputError for a path outside the repository."""
    carried = set()
    files = [("run.results_file", task.run.results_file)] + [("checks.file", c.file) for c in task.checks]
    for name, rel in files:
        if rel:
            carried |= {rel} & changed
            remove_inside(workspace, rel, field=name)
    return carried


def validate(task: TaskSpec, outputs: dict, *, workspace: Path, patch_error: str | None, sandbox_backend: str,
             spec_fields: dict, reader=None, watch: Watch | None = None) -> Validation:
    """Re-execute the run described by `outputs` in a fresh sandbox started from `workspace` (the clean tree of
    `patched_workspace`, whose git apply error is `patch_error`), closed before this returns. Deletes the results
    and check files from `workspace`; raises InputError when one is not a path inside the repository. `reader`
    (`reference_answer.Reader`): run the task's own command and read its answer where the reference's own run
    showed it, instead of the agent's script and a printed JSON answer. `watch`: the masked functions whose calls
    the re-run records (`hidden.observe`), into `Validation.observed`."""
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

    if patch_error is not None:
        return Validation("patch_failed", detail=f"git apply failed: {patch_error}")
    own_modules = _own_modules(workspace) | {Path(f).with_suffix("").parts[0] for f in task.masking.files}
    script = None if reader is not None else outputs.get("run_script")
    if task.run.agent_script and not script and reader is None:
        # the answer is what the agent's own script prints (AutoExperiment): the task's command is the hidden
        # reference run and never stands in for the agent's missing one
        return Validation("not_run", detail="the agent left no run script, and the task's answer is what the "
                          "agent's own script prints")
    if not task.run.command and not script:
        return Validation("not_run", detail="the task has no run command and the agent left no run script")
    try:
        carried = _remove_outputs(task, workspace, set(outputs.get("changed_files") or []))
        if script and (task.run.agent_script or not task.run.command):
            _place_run_script(workspace, script)
            command = f"bash {RUN_SCRIPT}"
        else:
            command = task.run.command
    except InputError as exc:  # the agent's tree turned a results or script path into a link leading out
        return Validation("runtime_error", detail=f"the agent's tree makes a path the re-run needs unusable: "
                          f"{exc.one_line()}")
    fault = None
    for _attempt in range(2):  # a sandbox failure after the agent's code started: once more in a fresh sandbox
        try:
            with create_sandbox(sandbox_backend, SandboxSpec(**spec_fields), workspace=workspace) as sandbox:
                return _rerun(task, outputs, sandbox, command, own_modules=own_modules, carried=carried,
                              reader=reader, watch=watch)
        except AgentFaultError as exc:
            fault = exc
    failed = Validation("runtime_error", command=command, detail=f"the re-run failed twice, each time in a fresh "
                        f"sandbox, after the agent's code had started there (the agent's failure): {fault}")
    if watch is not None:  # nothing observed, for a reason the agent's code caused: not a run left unobserved
        failed.observed = Observed(notes=["the re-run failed twice after the agent's code had started"])
    return failed


def _rerun(task: TaskSpec, outputs: dict, sandbox, command: str, *, own_modules: set[str],
           carried: set[str], reader=None, watch: Watch | None = None) -> Validation:
    """The re-run in `sandbox` and its comparisons. A sandbox failure (InfrastructureError) once the command has
    started there (`commands_started`) is what the agent's code can cause (its processes starving the reads, a
    restarted container refusing the next exec): AgentFaultError; before that, or when the harness could not set
    up its own mount (HarnessSetupError), it stays infrastructure."""
    try:
        return _rerun_in(task, outputs, sandbox, command, own_modules=own_modules, carried=carried, reader=reader,
                         watch=watch)
    except InfrastructureError as exc:
        if getattr(sandbox, "commands_started", 0) == 0 or isinstance(exc, HarnessSetupError):
            raise
        raise AgentFaultError(f"the sandbox failed after the re-run had started: {exc}") from exc


def _rerun_in(task: TaskSpec, outputs: dict, sandbox, command: str, *, own_modules: set[str],
              carried: set[str], reader=None, watch: Watch | None = None) -> Validation:
    workdir = getattr(sandbox, "workdir", None) or "/workspace"
    env = install(sandbox, watch) if watch is not None else None
    result = sandbox.exec(command, timeout=task.run.timeout_s, cwd=workdir, env=env)
    stdout, stderr = result.stdout or "", result.stderr or ""
    results_in_diff = task.run.results_file in carried
    v = Validation("passed", command=command, exit_code=result.returncode, duration_s=result.duration_s,
                   stdout_tail=stdout[-TAIL:], stderr_tail=stderr[-TAIL:], results_in_diff=results_in_diff)
    if watch is not None:
        v.observed = collect(sandbox, watch, completed=result.success)
    if not result.success:
        v.outcome = classify_failure(result, results_in_diff, own_modules=own_modules)
        v.detail = f"the re-run exited with {result.returncode}"
        return v
    try:
        parts = [c for c in (from_results_file(task, sandbox, workdir, outputs, results_in_diff),
                             from_stdout_json(task, stdout, outputs) if reader is None else
                             from_reader(task, reader, stdout, sandbox, workdir),
                             from_checks(task, sandbox, workdir, stdout, carried),
                             from_expected_outcome(task, stdout, stderr)) if c is not None]
    except InfrastructureError:
        raise
    except (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError, LookupError, OSError) as exc:
        # what the agent's code produced cannot be read or compared (a 5000-digit integer, nesting past any
        # depth): the agent's failure, never an exception that stops scoring
        v.outcome = "wrong_value"
        v.detail = f"the re-run's output cannot be compared: {type(exc).__name__}: {str(exc)[:300]}"
        return v
    _combine(v, parts)
    if v.awaiting_judge:
        v.judge_output = judge_excerpt(stdout, stderr)
    return v


def _combine(v: Validation, parts: list[Compared]) -> None:
    """Set `v`'s outcome, detail and metrics from every comparison made: passed only when there was at least one
    and all passed."""
    if not parts:
        v.outcome = "not_scored"
        v.detail = ("the re-run succeeded, but the task gives nothing to compare it with (no expected results, "
                    "success criterion, checks or expected outcome)")
        return
    for part in parts:
        for name, row in part.metrics.items():
            v.metrics[name if name not in v.metrics else f"check:{name}"] = row
    failed = [p for p in parts if p.outcome not in ("passed", "not_scored")]
    if failed:
        v.outcome = max(failed, key=lambda p: _SEVERITY.get(p.outcome, 0)).outcome
        v.detail = "; ".join(p.problem for p in failed)
    elif any(p.outcome == "not_scored" for p in parts):
        v.outcome, v.awaiting_judge = "not_scored", True
        v.detail = "; ".join(p.problem for p in parts if p.outcome == "not_scored")
    else:
        v.detail = f"the re-run matched all {len(v.metrics)} expected value(s)"


def settle(validation: Validation | None, verdicts: list) -> Validation | None:
    """The validation once the `execution-llm` judge has spoken: a `not_scored` re-run awaiting it becomes `passed`
    or `wrong_value` by its verdict; without a verdict (no endpoint, a failed reply) it stays `not_scored`, with
    the judge's reason."""
    if validation is None or not validation.awaiting_judge:
        return validation
    verdict = next((x for x in verdicts if x.phase == "execution"), None)
    if verdict is None:
        return validation
    if verdict.status != "ok" or verdict.passed is None:
        reason = verdict.reason or verdict.status
        validation.detail = f"{validation.detail}; the judge did not decide: {reason}"
        return validation
    validation.outcome = "passed" if verdict.passed else "wrong_value"
    analysis = f": {verdict.error_analysis}" if verdict.error_analysis else ""
    validation.detail = (f"the {verdict.judge} judge found the re-run's output "
                         f"{'consistent' if verdict.passed else 'inconsistent'} with the expected outcome{analysis}")
    validation.awaiting_judge = False
    return validation

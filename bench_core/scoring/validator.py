"""The execution validator: re-execute a run in a clean sandbox and accept only results that re-run produced.

Never the agent's own sandbox: start from a freshly prepared masked repository, apply the agent's diff, delete any
results file the diff carried, run the task's command (or the agent's run script) under a deadline in a sandbox of
its own (closed after the run; the hidden tests get another), then compare
each expected metric with numpy.isclose semantics (per-metric rtol and atol), or the task's success criterion.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.agents.base import RUN_SCRIPT
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.paths import remove_inside

OUTCOMES = ("passed", "wrong_value", "runtime_error", "timeout", "oom", "env_setup", "patch_failed", "not_run",
            "fabricated_result")
ENV_SETUP = re.compile(r"ModuleNotFoundError|No module named|ImportError|command not found|"
                       r"cannot open shared object file|DistributionNotFound|not installed")
TAIL = 4000


@dataclass
class Validation:
    outcome: str
    command: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    metrics: dict = field(default_factory=dict)
    detail: str = ""
    results_in_diff: bool = False


def isclose(observed: float, expected: float, rtol: float, atol: float) -> bool:
    """numpy.isclose semantics: |observed - expected| <= atol + rtol * |expected|."""
    if not (isinstance(observed, int | float) and math.isfinite(observed)):
        return False
    return abs(observed - expected) <= atol + rtol * abs(expected)


def compare_metrics(task: TaskSpec, results: dict) -> tuple[bool, dict]:
    """Compare observed results with the task's expectations; returns (all ok, per-metric detail)."""
    detail: dict = {}
    for m in task.expected_results:
        observed = results.get(m.name)
        ok = isinstance(observed, int | float) and isclose(float(observed), m.value, m.rtol, m.atol)
        detail[m.name] = {"observed": observed, "expected": m.value, "rtol": m.rtol, "atol": m.atol, "ok": ok}
    crit = task.success
    if crit is not None:
        observed = results.get(crit.metric)
        if crit.kind == "exact":
            ok = observed == crit.value
            expected = crit.value
        elif crit.kind == "tolerance":
            ok = isinstance(observed, int | float) and isclose(float(observed), float(crit.value), crit.rtol, crit.atol)
            expected = crit.value
        else:
            low, high = min(crit.oracle_values) - crit.band, max(crit.oracle_values) + crit.band
            ok = isinstance(observed, int | float) and low <= float(observed) <= high
            expected = [low, high]
        detail[crit.metric] = {"observed": observed, "expected": expected, "criterion": crit.kind, "ok": ok}
    return bool(detail) and all(d["ok"] for d in detail.values()), detail


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


def claimed_results(diff: str, results_file: str) -> dict | None:
    """The results the agent's own changes carry (the file's content as added by the diff), if any."""
    marker = f"+++ b/{results_file}"
    if marker not in diff:
        return None
    lines = []
    for line in diff.split(marker, 1)[1].splitlines()[1:]:
        if line.startswith("diff --git "):
            break
        if line.startswith("+"):
            lines.append(line[1:])
    try:
        value = json.loads("\n".join(lines))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def disagreements(task: TaskSpec, claimed: dict, observed: dict) -> list[str]:
    """Metrics whose claimed value differs from what the clean re-run produced (beyond the metric's tolerance)."""
    names = [(m.name, m.rtol, m.atol) for m in task.expected_results]
    if task.success is not None:
        names.append((task.success.metric, task.success.rtol, task.success.atol))
    out = []
    for name, rtol, atol in names:
        c, o = claimed.get(name), observed.get(name)
        if not isinstance(c, int | float):
            continue
        if not isinstance(o, int | float):
            out.append(f"{name}: claimed {c}, the re-run produced none")
        elif not isclose(float(c), float(o), max(rtol, 1e-6), atol):
            out.append(f"{name}: claimed {c}, re-run {o}")
    return out


def patched_workspace(task: TaskSpec, diff: str, *, scratch: Path, repo: Path | None = None
                      ) -> tuple[Path, str | None]:
    """Prepare the masked repository afresh in `scratch` and apply the agent's diff to it: the clean tree that the
    validator and the hidden tests start from. Returns the tree and git apply's error (None when it applied)."""
    from failatlas.bench_core.prepare import prepare_workspace

    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    workspace = Path(prepare_workspace(task, scratch / "workspace", repo=repo).path)
    return workspace, apply_diff(workspace, diff)


def validate(task: TaskSpec, outputs: dict, *, workspace: Path, patch_error: str | None, sandbox_backend: str,
             spec_fields: dict) -> Validation:
    """Re-execute the run described by `outputs` in a fresh sandbox started from `workspace` (the clean tree of
    `patched_workspace`, whose git apply error is `patch_error`), closed before this returns. Deletes the results
    file from `workspace`; raises InputError when the task's results file is not a path inside the repository."""
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

    if patch_error is not None:
        return Validation("patch_failed", detail=f"git apply failed: {patch_error}")
    own_modules = _own_modules(workspace) | {Path(f).with_suffix("").parts[0] for f in task.masking.files}
    results_in_diff = False
    if task.run.results_file:  # a results file the diff carried is not a result of the re-run
        results_in_diff = task.run.results_file in (outputs.get("changed_files") or [])
        remove_inside(workspace, task.run.results_file, field="run.results_file")
    if task.run.command:
        command = task.run.command
    elif outputs.get("run_script"):
        command = f"bash {RUN_SCRIPT}"
    else:
        return Validation("not_run", detail="the task has no run command and the agent left no run script")
    with create_sandbox(sandbox_backend, SandboxSpec(**spec_fields), workspace=workspace) as sandbox:
        return _rerun(task, outputs, sandbox, command, own_modules=own_modules, results_in_diff=results_in_diff)


def _rerun(task: TaskSpec, outputs: dict, sandbox, command: str, *, own_modules: set[str],
           results_in_diff: bool) -> Validation:
    workdir = getattr(sandbox, "workdir", None) or "/workspace"
    result = sandbox.exec(command, timeout=task.run.timeout_s, cwd=workdir)
    v = Validation("passed", command=command, exit_code=result.returncode, duration_s=result.duration_s,
                   stdout_tail=(result.stdout or "")[-TAIL:], stderr_tail=(result.stderr or "")[-TAIL:],
                   results_in_diff=results_in_diff)
    if not result.success:
        v.outcome = classify_failure(result, results_in_diff, own_modules=own_modules)
        v.detail = f"the re-run exited with {result.returncode}"
        return v
    if not task.run.results_file:
        v.detail = "the re-run succeeded; the task declares no results to compare"
        return v
    try:
        raw = sandbox.read_file(f"{workdir}/{task.run.results_file}")
        results = json.loads(raw)
    except (FileNotFoundError, LookupError):
        v.outcome = "fabricated_result" if results_in_diff else "runtime_error"
        v.detail = f"the re-run exited 0 but did not write {task.run.results_file}"
        return v
    except PermissionError as exc:  # SandboxPathError: a folder, FIFO or link where the results file belongs
        v.outcome, v.detail = "runtime_error", f"{task.run.results_file} is not a readable file: {exc}"
        return v
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        v.outcome, v.detail = "runtime_error", f"{task.run.results_file} is not valid JSON: {exc}"
        return v
    results = results if isinstance(results, dict) else {}
    claimed = claimed_results(outputs.get("diff") or "", task.run.results_file) if results_in_diff else None
    lies = disagreements(task, claimed, results) if claimed else []
    ok, v.metrics = compare_metrics(task, results)
    if lies:
        v.outcome = "fabricated_result"
        v.detail = "the agent's results file disagrees with the clean re-run: " + "; ".join(lies)
    elif not ok:
        v.outcome = "wrong_value"
        wrong = [k for k, d in v.metrics.items() if not d["ok"]]
        v.detail = "metrics off their expected values: " + ", ".join(wrong)
    return v

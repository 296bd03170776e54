"""The command a user runs next for each status that is not `valid` (issue 52, R2): a status that names a cause
but no way out leaves a researcher reading the source. Pure: the verdict, the task and the validation's own
parameters in, one line out; the commands are the ones this tool has, with the task's id and paper filled in.
"""

from __future__ import annotations

import re
import shlex

from failatlas.bench_core.task_validation.model import TaskVerdict, ValidateParams
from failatlas.bench_core.tasks.model import TaskSpec

_NO_PYTHON = re.compile(r"\bpython3?: (?:command )?not found")
_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")


def _validate_again(task: TaskSpec, params: ValidateParams, *extra: str) -> str:
    """`failatlas tasks validate` of the task's paper (or the task), with this call's sandbox and `extra`."""
    scope = f"--paper {shlex.quote(task.paper.id)}" if task.paper.id else f"--task {shlex.quote(task.id)}"
    return " ".join(["failatlas tasks validate", scope, f"--sandbox {params.sandbox}", *extra])


def _build_env(task: TaskSpec, params: ValidateParams) -> str:
    if params.sandbox == "bwrap":
        return f"failatlas sandbox build-env --venv --task {shlex.quote(task.id)} --best-effort [--python PATH]"
    return f"failatlas sandbox build-env --task {shlex.quote(task.id)} --best-effort"


def next_step(verdict: TaskVerdict, task: TaskSpec, params: ValidateParams) -> str:
    """What to run next for `verdict` (empty for `valid`)."""
    status, reason, tid = verdict.status, verdict.reason, shlex.quote(task.id)
    prebuilt = (params.resources.environment or task.resources.environment) == "prebuilt"
    if status == "valid":
        return ""
    if status == "env-failed":
        missing = _MODULE.search(reason)
        if _NO_PYTHON.search(reason) and not prebuilt:
            return (f"the sandbox's root has no `python` for the task's command: {_build_env(task, params)}, then "
                    + _validate_again(task, params, "--environment prebuilt"))
        if prebuilt:
            what = f" (it lacks {missing.group(1)})" if missing else ""
            return (f"the built environment is not enough{what}: rebuild it with the package index reachable or "
                    f"--python an interpreter that has it: {_build_env(task, params)} --force")
        return f"{_build_env(task, params)}, then " + _validate_again(task, params, "--environment prebuilt")
    if status == "data-unavailable":
        return ("give the data: " + _validate_again(task, params, "--data NAME=PATH")
                + " (docs/benchmarks.md: a copy of the repository whose data paths link into /data/NAME, "
                  "registered with `failatlas repos add COPY --paper P`)")
    if status == "needs-gpu":
        return ("run it on a host with the GPUs it needs (the same command there), or, if it runs on the CPU, "
                + _validate_again(task, params, "--gpus 0"))
    if status == "repo-unavailable":
        paper = f"--paper {shlex.quote(task.paper.id)}" if task.paper.id else f"--task {tid}"
        return f"failatlas repos add PATH_OR_URL {paper}, then " + _validate_again(task, params)
    if status == "prepare-fails":
        return f"failatlas tasks prepare {tid} --out DIR shows the refusal; fix what it names, then validate again"
    if status == "gold-fails":
        run = f"failatlas bench show {verdict.gold_run_id}" if verdict.gold_run_id else "failatlas bench list"
        if "restored to its stubs" in reason:
            return (f"{run}: the reference command runs none of the masked code, so it checks nothing of an "
                    "agent's; give one that does (--reference-command CMD) or leave the task out")
        return f"{run}: read the failing check; if the reference is right, the task's expected values are not"
    if status == "null-passes":
        run = f"failatlas bench show {verdict.null_run_id}" if verdict.null_run_id else "failatlas bench list"
        return f"{run}: the task's checks pass an agent that does nothing; tighten its expected values"
    if status == "not-checkable":
        return ("give the reference the benchmark lacks: "
                + _validate_again(task, params, "--reference PATH", "or --reference-command CMD"))
    if status == "judges-only":
        return ("give a command that runs the reference and prints its results, so execution is checked: "
                + _validate_again(task, params, "--reference-command CMD", "--expected-from-reference"))
    if status == "infra-error":
        if "build-env" in reason:
            return f"{_build_env(task, params)}, then " + _validate_again(task, params)
        run = verdict.gold_run_id or verdict.null_run_id
        return ((f"failatlas bench show {run}; " if run else "")
                + "then run the same command again (stored runs are reused, infrastructure errors redone)")
    return ""

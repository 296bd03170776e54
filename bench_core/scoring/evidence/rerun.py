"""The clean re-run, as evidence: the run's command executed again in a fresh sandbox on a tree the harness built,
and what it left, captured before the sandbox closes (docs/metrics.md, "How E is decided").

Never the agent's own sandbox: start from a freshly prepared masked repository (`clean_trees`: the agent's diff
applied to it, and the pristine copy beside it), delete any results or check file the diff carried, run the task's
command (or the agent's run script, where E is script-attributed) under a deadline in a sandbox of its own, then
read back, within caps and never through a link, the files the task's E rules compare (`erules.wanted_files`):
the results file, each check's file, the files a reader derived from the reference reads. What the re-run printed
and wrote is kept as a `Rerun`; comparing it with what the task expects is the E rules' job (`erules/`) and deciding
E the execution check's (`checks/execution.py`). Nothing here decides a verdict.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.agents.base import OUTPUT_DIR, RUN_SCRIPT
from failatlas.bench_core.hidden.observe import Observed, Watch, collect, collect_sample, install
from failatlas.bench_core.sandbox.model import ExecResult
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import AgentFaultError, HarnessSetupError, InfrastructureError, InputError
from failatlas.core.paths import remove_inside

TAIL = 4000

__all__ = ["TAIL", "Captured", "Rerun", "apply_diff", "clean_trees", "patched_workspace", "rerun"]


@dataclass(frozen=True)
class Captured:
    """One file the re-run left, as read through its sandbox: its first bytes (`data`), or why there were none:
    `missing` (not written), `unreadable` (a folder, FIFO or link where the file belongs), `refused` (a path the
    harness refuses), `failed` (any other error of the read), with the reader's message."""

    data: bytes | None = None
    missing: str = ""
    unreadable: str = ""
    refused: str = ""
    failed: str = ""


@dataclass
class Rerun:
    """What one re-run did. `status`: `ran` (the command ran; `result` says how it ended), `patch_failed` (the
    agent's diff did not apply), `not_run` (nothing to run), `unusable` (the agent's tree made a path the re-run
    needs unusable), `agent_fault` (the sandbox failed twice after the agent's code had started: its failure).
    `files`: what `erules.wanted_files` asked for, by path relative to the working copy. `carried`: the results and
    check files the agent's diff carried (deleted before the run). `observed`: the masked functions' calls, where
    the run was observed."""

    status: str
    command: str | None = None
    detail: str = ""
    result: ExecResult | None = None
    files: dict[str, Captured] = field(default_factory=dict)
    workdir: str = "/workspace"
    carried: set[str] = field(default_factory=set)
    own_modules: set[str] = field(default_factory=set)
    script: bool = False
    observed: Observed | None = None
    # commands run after the task's command in the same sandbox (an impossible twin's visible check): name ->
    # {exit, timed_out, stdout, stderr}
    after: dict[str, dict] = field(default_factory=dict)

    @property
    def stdout(self) -> str:
        return (self.result.stdout or "") if self.result is not None else ""

    @property
    def stderr(self) -> str:
        return (self.result.stderr or "") if self.result is not None else ""

    @property
    def exited_zero(self) -> bool:
        return self.result is not None and self.result.success

    def summary(self) -> dict:
        """What the evidence record stores of the re-run."""
        out: dict = {"status": self.status, "command": self.command, "script": self.script}
        if self.result is not None:
            out.update(exit_code=self.result.returncode, duration_s=round(self.result.duration_s, 3),
                       timed_out=self.result.timed_out, killed_reason=self.result.killed_reason)
        out["files"] = {rel: (f"{len(c.data)} bytes" if c.data is not None else
                              "missing" if c.missing else "unreadable" if c.unreadable else "refused" if c.refused
                              else "failed")
                        for rel, c in self.files.items()}
        if self.carried:
            out["carried_from_diff"] = sorted(self.carried)
        if self.observed is not None:
            out["observed_calls"] = len(self.observed.cases)
        if self.detail:
            out["detail"] = self.detail[:500]
        return out


def apply_diff(workspace: Path, diff: str) -> str | None:
    """Apply a git diff to `workspace`; returns an error message, or None on success."""
    if not diff.strip():
        return None
    proc = subprocess.run(["git", "apply", "--binary", "--whitespace=nowarn", "-"], cwd=workspace,
                          input=diff.encode(), capture_output=True)
    return proc.stderr.decode(errors="replace")[-TAIL:] if proc.returncode else None


def _own_modules(workspace: Path | None) -> set[str]:
    """Top-level module names the repository itself provides or should provide (masked files included)."""
    if workspace is None or not workspace.is_dir():
        return set()
    return {p.stem for p in workspace.glob("*.py")} | {p.name for p in workspace.iterdir() if p.is_dir()}


def patched_workspace(task: TaskSpec, diff: str, *, scratch: Path, repo: Path | None = None
                      ) -> tuple[Path, str | None]:
    """Prepare the masked repository afresh in `scratch` and apply the agent's diff to it: the clean tree that the
    re-run and the hidden tests start from. Returns the tree and git apply's error (None when it applied)."""
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


def rerun(task: TaskSpec, outputs: dict, *, workspace: Path, patch_error: str | None, sandbox_backend: str,
          spec_fields: dict, use_script: bool, wanted: dict[str, int], watch: Watch | None = None,
          after: dict[str, str] | None = None) -> Rerun:
    """Re-execute the run described by `outputs` in a fresh sandbox started from `workspace` (the clean tree of
    `clean_trees`, whose git apply error is `patch_error`), closed before this returns, and capture the files of
    `wanted` (path -> bytes to read). `use_script`: run the agent's stored run script where the task's answer is
    what that script prints (else the task's own command). Deletes the results and check files from `workspace`.
    `watch`: the masked functions whose calls the re-run records (`hidden.observe`). `after`: commands (name ->
    command) run next in the same sandbox, their ends kept in `Rerun.after`. Raises InfrastructureError when the
    sandbox fails before the agent's code started."""
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

    if patch_error is not None:
        return Rerun("patch_failed", detail=f"git apply failed: {patch_error}")
    own_modules = _own_modules(workspace) | {Path(f).with_suffix("").parts[0] for f in task.masking.files}
    script = outputs.get("run_script") if use_script else None
    if task.run.agent_script and not script and use_script:
        # the answer is what the agent's own script prints (AutoExperiment): the task's command is the hidden
        # reference run and never stands in for the agent's missing one
        return Rerun("not_run", detail="the agent left no run script, and the task's answer is what the agent's "
                     "own script prints")
    if not task.run.command and not script:
        return Rerun("not_run", detail="the task has no run command and the agent left no run script")
    try:
        carried = _remove_outputs(task, workspace, set(outputs.get("changed_files") or []))
        if script and (task.run.agent_script or not task.run.command):
            _place_run_script(workspace, script)
            command = f"bash {RUN_SCRIPT}"
        else:
            command = task.run.command
    except InputError as exc:  # the agent's tree turned a results or script path into a link leading out
        return Rerun("unusable", detail=f"the agent's tree makes a path the re-run needs unusable: "
                     f"{exc.one_line()}")
    fault = None
    for _attempt in range(2):  # a sandbox failure after the agent's code started: once more in a fresh sandbox
        try:
            with create_sandbox(sandbox_backend, SandboxSpec(**spec_fields), workspace=workspace) as sandbox:
                done = _run(task, sandbox, command, wanted=wanted, watch=watch, after=after or {})
                done.carried, done.own_modules, done.script = carried, own_modules, bool(script)
                return done
        except AgentFaultError as exc:
            fault = exc
    failed = Rerun("agent_fault", command=command, carried=carried, own_modules=own_modules, script=bool(script),
                   detail=f"the re-run failed twice, each time in a fresh sandbox, after the agent's code had "
                   f"started there (the agent's failure): {fault}")
    if watch is not None:  # nothing observed, for a reason the agent's code caused: not a run left unobserved
        failed.observed = Observed(notes=["the re-run failed twice after the agent's code had started"])
    return failed


def _run(task: TaskSpec, sandbox, command: str, *, wanted: dict[str, int], watch: Watch | None,
         after: dict[str, str]) -> Rerun:
    """The re-run in `sandbox` and what it left. A sandbox failure (InfrastructureError) once the command has
    started there (`commands_started`) is what the agent's code can cause (its processes starving the reads, a
    restarted container refusing the next exec): AgentFaultError; before that, or when the harness could not set
    up its own mount (HarnessSetupError), it stays infrastructure."""
    try:
        return _run_in(task, sandbox, command, wanted=wanted, watch=watch, after=after)
    except InfrastructureError as exc:
        if getattr(sandbox, "commands_started", 0) == 0 or isinstance(exc, HarnessSetupError):
            raise
        raise AgentFaultError(f"the sandbox failed after the re-run had started: {exc}") from exc


def _capture(sandbox, path: str, max_bytes: int) -> Captured:
    try:
        return Captured(data=sandbox.read_file(path, max_bytes=max_bytes))
    except InfrastructureError:  # the sandbox failed (a timeout is an OSError too): `_run` decides whose failure
        raise
    except (FileNotFoundError, LookupError) as exc:
        return Captured(missing=str(exc) or "not written")
    except PermissionError as exc:  # SandboxPathError: a folder, FIFO or link where the file belongs
        return Captured(unreadable=str(exc) or "not a readable file")
    except InputError as exc:
        return Captured(refused=exc.one_line())
    except (OSError, ValueError) as exc:  # read back as the agent's data: compared as unreadable, never raised here
        return Captured(failed=f"{type(exc).__name__}: {exc}")


def _run_in(task: TaskSpec, sandbox, command: str, *, wanted: dict[str, int], watch: Watch | None,
            after: dict[str, str]) -> Rerun:
    workdir = getattr(sandbox, "workdir", None) or "/workspace"
    env = install(sandbox, watch) if watch is not None else None
    result = sandbox.exec(command, timeout=task.run.timeout_s, cwd=workdir, env=env)
    done = Rerun("ran", command=command, result=result, workdir=workdir)
    if watch is not None:
        done.observed = collect(sandbox, watch, completed=result.success)
        if watch.sample:  # every call's chance to be looked at (evidence/calls.py)
            collect_sample(sandbox, watch, done.observed)
    if result.success:
        done.files = {rel: _capture(sandbox, f"{workdir}/{rel}", cap) for rel, cap in wanted.items()}
    for name, line in after.items():
        res = sandbox.exec(line, timeout=max(60.0, float(task.run.timeout_s)), cwd=workdir)
        done.after[name] = {"exit": res.returncode, "timed_out": res.timed_out, "stdout": (res.stdout or "")[-TAIL:],
                            "stderr": (res.stderr or "")[-TAIL:]}
    return done


class CapturedFiles:
    """The captured files read as a sandbox reads them (`read_file`): the E rules compare what the re-run left
    through this, after its sandbox has closed. A file that was not captured reads as missing."""

    def __init__(self, done: Rerun) -> None:
        self.done = done
        self.workdir = done.workdir

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        rel = path[len(self.workdir) + 1:] if path.startswith(self.workdir + "/") else path
        found = self.done.files.get(rel)
        if found is None or found.missing:
            raise FileNotFoundError(found.missing if found is not None else f"{rel} was not captured")
        if found.unreadable:
            raise PermissionError(found.unreadable)
        if found.refused:
            raise InputError(found.refused)
        if found.failed:
            raise OSError(found.failed)
        return found.data[:max_bytes]


def own_module_missing(text: str, own_modules: set[str]) -> bool:
    """Whether every module a `No module named` error of `text` names is the repository's own."""
    missing = [m.split(".")[0] for m in MISSING_MODULE.findall(text)]
    return bool(missing) and all(m in own_modules for m in missing)


MISSING_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")

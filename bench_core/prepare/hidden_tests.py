"""A task author's check: run a task's hidden tests against a tree the author trusts (the reference, or the masked
repository to see them fail), with the same judge that scores agents (`bench_core.hidden`).

The tree runs in a private copy on the host (plain subprocesses behind the three calls of the Sandbox protocol the
relay uses; `prepare` sits below `sandbox`), one worker process per call of the tests' `agent` fixture; the tests
themselves run in the judge process with the task's masked repository (its trusted helpers, such as data
generation) on their path. Never point it at an agent's workspace: it isolates nothing. Agents' work is judged by
`scoring.evidence.hidden.run_hidden_tests`, in the run's own sandbox kind (docs/sandbox.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from failatlas.bench_core.prepare.leaks import task_path
from failatlas.bench_core.prepare.workspace import prepare_workspace
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError


class HiddenTestReport(BaseModel):
    """The judge's counts for the hidden tests; `passed` only when at least one test ran and all passed.
    `failures_detail`: one record per failed test (test, exception, object, message)."""

    task_id: str
    tests: int
    failures: int
    errors: int
    skipped: int
    returncode: int
    output: str
    failures_detail: list[dict] = []

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and self.tests > 0 and self.failures == 0 and self.errors == 0


def hidden_test_paths(task: TaskSpec) -> list[Path]:
    """Paths of the task's hidden test files (relative entries are relative to the task file's folder)."""
    paths: list[Path] = []
    for entry in task.implementation.hidden_tests:
        path = task_path(task, entry, field="implementation.hidden_tests")
        if path.is_dir():  # each file found in the folder obeys the same rule (a link in it may lead out)
            paths.extend(task_path(task, str(p), field="implementation.hidden_tests")
                         for p in sorted(path.glob("test*.py")))
        else:
            paths.append(path)
    return paths


def _paths(task: TaskSpec) -> list[Path]:
    if not task.implementation.hidden_tests:
        raise InputError(f"task {task.id} has no hidden tests", field="implementation.hidden_tests")
    paths = hidden_test_paths(task)
    for path in paths:
        if not path.is_file():
            raise InputError(f"task {task.id}: a hidden test file does not exist", path=str(path),
                             field="implementation.hidden_tests")
    if not paths:
        raise InputError(f"task {task.id}: the hidden test folder holds no test*.py file",
                         field="implementation.hidden_tests")
    return paths


@dataclass
class _Result:
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    killed_reason: str | None = None
    truncated: bool = False


class _TrustedCopy:
    """The three calls of the Sandbox protocol the hidden-test relay uses, on a private copy of a tree the task
    author trusts, as plain host subprocesses (no isolation: never for an agent's tree)."""

    def __init__(self, tree: Path, dest: Path) -> None:
        shutil.copytree(tree, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        self.workdir = str(dest)

    def _path(self, path: str) -> Path:
        return Path(self.workdir) / path

    def write_file(self, path: str, data: bytes | str) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        partial.write_bytes(data.encode() if isinstance(data, str) else data)
        os.replace(partial, target)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        with open(self._path(path), "rb") as handle:
            return handle.read(max_bytes)

    def exec(self, cmd: str, *, timeout: float, cwd: str | None = None, env: dict | None = None,
             output_limit: int = 1 << 20) -> _Result:
        start = time.monotonic()
        try:
            proc = subprocess.run(["bash", "-c", cmd], cwd=cwd or self.workdir, env={**os.environ, **(env or {})},
                                  capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return _Result(None, "", "", time.monotonic() - start, timed_out=True, killed_reason="timeout")
        return _Result(proc.returncode, proc.stdout[-output_limit:].decode(errors="replace"),
                       proc.stderr[-output_limit:].decode(errors="replace"), time.monotonic() - start,
                       truncated=len(proc.stdout) > output_limit)


def run_hidden_tests(task: TaskSpec, tree: Path, *, python: str = sys.executable,
                     timeout_s: float = 300.0) -> HiddenTestReport:
    """Run the hidden tests with the judge (`python` runs it) against a private copy of `tree`, the task's masked
    repository giving the tests their helpers; report counts.

    Raises InputError when the task has no hidden tests or one of their files is missing; a run past
    `timeout_s` counts as an error; a hidden test file that cannot be collected raises JudgeError.
    """
    from failatlas.bench_core.hidden import run_judge

    for entry in task.implementation.hidden_tests:
        task_path(task, entry, field="implementation.hidden_tests")
    paths = _paths(task)
    with tempfile.TemporaryDirectory(prefix="failatlas-hidden-") as tmp:
        pristine = Path(prepare_workspace(task, Path(tmp) / "masked").path)
        sandbox = _TrustedCopy(tree, Path(tmp) / "tree")
        run = run_judge(paths, sandbox, pristine=pristine, timeout_s=timeout_s, python=python)
    lines = [f"PASSED {name}" for name in run.passed]
    lines += [f"FAILED {f['test']}: {f['exception']}" + (f" in {f['object']}" if f.get("object") else "")
              + (f": {f['message']}" if f.get("message") else "") for f in run.failures]
    lines += run.problems
    return HiddenTestReport(task_id=task.id, tests=run.total, failures=len(run.failures), errors=len(run.problems),
                            skipped=0, returncode=0 if run.ok else 1, output="\n".join(lines)[-20000:],
                            failures_detail=run.failures)

"""A task author's check: run a task's hidden tests against a tree the author trusts (the reference, or the masked
repository to see them fail), on the host, in a throwaway copy.

Never point it at an agent's workspace: it runs on the host, with the tree's conftest.py and pytest settings.
Agents' work is judged by `scoring.offline_judges.judge_hidden_tests`, in a fresh sandbox, out of the agent's
reach (docs/sandbox.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from pydantic import BaseModel

from failatlas.bench_core.prepare.leaks import task_path
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError

HIDDEN_DIR = "_hidden_tests"


class HiddenTestReport(BaseModel):
    """pytest's counts for the hidden tests; `passed` only when at least one test ran and all passed."""

    task_id: str
    tests: int
    failures: int
    errors: int
    skipped: int
    returncode: int
    output: str

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and self.tests > 0 and self.failures == 0 and self.errors == 0


def run_hidden_tests(task: TaskSpec, tree: Path, *, python: str = sys.executable,
                     timeout_s: float = 300.0) -> HiddenTestReport:
    """Copy `tree` (a tree the task author trusts, never an agent's) to a temporary folder, add the hidden tests,
    run pytest there with `python`, report counts.

    Raises InputError when the task has no hidden tests or one of their files is missing; a test run that
    times out counts as an error.
    """
    if not task.implementation.hidden_tests:
        raise InputError(f"task {task.id} has no hidden tests", field="implementation.hidden_tests")
    with tempfile.TemporaryDirectory(prefix="failatlas-hidden-") as tmp:
        work = Path(tmp) / "tree"
        shutil.copytree(tree, work, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        (work / HIDDEN_DIR).mkdir()
        for hidden in task.implementation.hidden_tests:
            path = task_path(task, hidden, field="implementation.hidden_tests")
            if not path.is_file():
                raise InputError(f"task {task.id}: a hidden test file does not exist", path=str(path),
                                 field="implementation.hidden_tests")
            shutil.copy2(path, work / HIDDEN_DIR / path.name)
        report = Path(tmp) / "report.xml"
        env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
        command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={work}",
                   f"--junitxml={report}", HIDDEN_DIR]
        try:
            result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                                    timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            return HiddenTestReport(task_id=task.id, tests=0, failures=0, errors=1, skipped=0, returncode=-1,
                                    output=f"hidden tests timed out after {timeout_s} s: {exc}")
        counts = _junit_counts(report)
        return HiddenTestReport(task_id=task.id, returncode=result.returncode,
                                output=(result.stdout + result.stderr)[-20000:], **counts)


def _junit_counts(report: Path) -> dict[str, int]:
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if not report.is_file():
        counts["errors"] = 1
        return counts
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    return counts

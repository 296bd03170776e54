"""The task's hand-written hidden tests, run as evidence: assertions, counting and result in a judge process on the
host that never imports the agent's code; the agent's code runs in a fresh sandbox holding only the judged tree,
one worker process per call, plain data back (`hidden/`). After a pass they run again on the counterfactual tree
(the masked parts restored to their stubs: `counterfactual.py`) and, where the judged tree is the agent's own, on the
transplant tree (`transplant.py`). The verdict is `checks/hidden_tests.py`'s."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from failatlas.bench_core.hidden import JudgeRun
from failatlas.bench_core.hidden.relay import run_judge_retried
from failatlas.bench_core.prepare.hidden_tests import hidden_test_paths
from failatlas.bench_core.scoring.evidence.counterfactual import tree_digest
from failatlas.bench_core.tasks.model import TaskSpec

StartSandbox = Callable[[dict[str, str]], Any]
Counterfactual = Callable[[], tuple[Any, StartSandbox | None]]


@dataclass
class HiddenRun:
    """The hidden tests' run on the judged tree (`run`; None: the task has none, or the agent's diff did not apply:
    `no_tree`), and after a pass their runs on the counterfactual and transplant trees (each a dict with
    `status`, `passed`, `total`, `notes`)."""

    run: JudgeRun | None = None
    no_tests: bool = False
    no_tree: bool = False
    counterfactual: dict | None = None
    transplant: dict | None = None
    notes: list[str] = field(default_factory=list)


def sandbox_run(paths: list[Path], start: StartSandbox, task: TaskSpec, pristine: Path | None) -> JudgeRun:
    """The judge's run on the tree `start` starts from; within one scoring batch (`start.memo`), a tree already
    judged (same content, same task, a sandbox of the same kind and settings) gets that run's result again instead
    of a second run."""
    memo, tree = getattr(start, "memo", None), getattr(start, "tree", None)
    key = None
    if memo is not None and tree is not None:
        digest = tree_digest(Path(tree))
        key = ("hidden-tests", task.id, digest, getattr(start, "where", None)) if digest else None
        if key in memo:
            return copy.deepcopy(memo[key])
    run = run_judge_retried(paths, lambda: start({}), pristine=pristine,
                            timeout_s=float(task.run.timeout_s) * len(paths))
    if key is not None and not run.problems:
        memo[key] = copy.deepcopy(run)
    return run


def _again(paths: list[Path], task: TaskSpec, pristine: Path | None, tree: Counterfactual | None, what: str,
           passing: str, failing: str) -> dict:
    """The hidden tests again on another tree of the run (`tree()`: its description and a sandbox starter)."""
    if tree is None:
        return {"status": "not_applicable", "note": f"no {what} tree was given to this judge"}
    restored, start = tree()
    if start is None:
        return {"status": "not_applicable", "note": "; ".join(restored.notes)}
    run = sandbox_run(paths, start, task, pristine)
    return {"status": passing if run.ok else failing, "passed": len(run.passed), "total": run.total,
            "notes": restored.notes[:10]}


def run_hidden_tests(task: TaskSpec, start_sandbox: StartSandbox | None, *, pristine: Path | None = None,
                     counterfactual: Counterfactual | None = None,
                     transplant: Counterfactual | None = None) -> HiddenRun:
    """Run the hidden tests on the tree `start_sandbox(read_only_inputs)` starts (None: the diff did not apply);
    `pristine` is the masked repository without the diff. A pass is run again on the counterfactual tree and, when
    that fails as expected, on the transplant tree. Raises InfrastructureError (SandboxError) when a sandbox cannot
    start, JudgeError when the judge itself fails, AgentFaultError when the agent's code broke it."""
    paths = hidden_test_paths(task)
    if not paths:
        return HiddenRun(no_tests=True)
    if start_sandbox is None:
        return HiddenRun(no_tree=True)
    run = sandbox_run(paths, start_sandbox, task, pristine)
    found = HiddenRun(run)
    if run.ok:
        found.counterfactual = _again(paths, task, pristine, counterfactual, "counterfactual",
                                      "passed_without_implementation", "failed_as_expected")
        if found.counterfactual["status"] != "passed_without_implementation":
            found.transplant = _again(paths, task, pristine, transplant, "transplant", "passed",
                                      "failed_without_the_rest_of_the_diff")
    return found

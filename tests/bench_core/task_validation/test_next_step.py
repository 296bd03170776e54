"""Issue 52, R2: every status that is not `valid` names the command to run next, and a gold re-run stopped by a
root without `python` is `env-failed` saying so (it was `gold-fails` with no way out)."""

from __future__ import annotations

import pytest

from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.task_validation.classify import RunFacts, gold_status
from failatlas.bench_core.task_validation.model import STATUSES, TaskVerdict, ValidateParams
from failatlas.bench_core.task_validation.next_step import next_step


@pytest.fixture(scope="module")
def task():
    [t] = [t for t in load_suite("failatlas-mini") if t.id == "mini-ridge-cv"]
    return t.model_copy(update={"paper": t.paper.model_copy(update={"id": "1234.5678"})})


def _verdict(task, status: str, reason: str = "because") -> TaskVerdict:
    return TaskVerdict(task_id=task.id, benchmark=task.benchmark, status=status, reason=reason,
                       gold_run_id="gold-run-1", null_run_id="null-run-1")


@pytest.mark.parametrize("status", [s for s in STATUSES if s != "valid"])
def test_every_status_but_valid_names_a_failatlas_command(task, status):
    step = next_step(_verdict(task, status), task, ValidateParams(sandbox="bwrap"))
    assert "failatlas " in step, (status, step)


def test_valid_has_no_next_step(task):
    assert next_step(_verdict(task, "valid"), task, ValidateParams()) == ""


def test_env_failed_names_the_build_for_the_sandbox_in_use_and_the_paper(task):
    bwrap = next_step(_verdict(task, "env-failed", "execution: No module named 'torch'"), task,
                      ValidateParams(sandbox="bwrap"))
    assert "failatlas sandbox build-env --venv --task mini-ridge-cv" in bwrap and "--python PATH" in bwrap
    assert "failatlas tasks validate --paper 1234.5678 --sandbox bwrap --environment prebuilt" in bwrap
    docker = next_step(_verdict(task, "env-failed"), task, ValidateParams(sandbox="docker"))
    assert "build-env --task mini-ridge-cv" in docker and "--venv" not in docker


def test_env_failed_with_a_prebuilt_environment_says_what_it_lacks(task):
    from failatlas.bench_core.runs import ResourceOverrides

    params = ValidateParams(sandbox="bwrap", resources=ResourceOverrides(environment="prebuilt"))
    step = next_step(_verdict(task, "env-failed", "execution: No module named 'torch'"), task, params)
    assert "it lacks torch" in step and "--force" in step


def test_a_root_without_python_is_env_failed_with_the_build_to_run(task):
    facts = RunFacts(run_id="r", status="completed", phases={"M": 1, "D": 1, "I": 1, "E": 0, "C": 1},
                     outcome="runtime_error", output="bash: line 3: python: command not found\n")
    status, reason = gold_status(facts)
    assert (status, reason) == ("env-failed", "execution: python: command not found: the sandbox has no "
                                              "interpreter of that name")
    step = next_step(_verdict(task, status, reason), task, ValidateParams(sandbox="bwrap"))
    assert step.startswith("the sandbox's root has no `python`") and "--environment prebuilt" in step


def test_gold_fails_and_null_passes_point_at_their_runs(task):
    assert "failatlas bench show gold-run-1" in next_step(_verdict(task, "gold-fails"), task, ValidateParams())
    assert "failatlas bench show null-run-1" in next_step(_verdict(task, "null-passes"), task, ValidateParams())

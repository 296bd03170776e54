"""Issue 52, R3: a reference the user gives where the benchmark gives none.

- A RExBench-like extension task (the mini-suite's imbalance-reweight with its repository replaced by the base and
  neither overlay nor hidden tests, as RExBench releases it) is `not-checkable`; with `--reference TREE` (or the
  same as a patch) it is `valid`: gold restores the user's reference, null keeps the base.
- An EXP-Bench-like task (ridge-cv without a command or expected values, as EXP-Bench's prose tasks are) gets no
  execution check; with `--reference-command CMD --expected-from-reference` the numbers the command prints are
  expected, and the task is `valid` with E checked by running code.
Both are recorded with the task in the catalog and warn `reference-from-user`."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from failatlas.bench_core.suites import load_task, suite_dir
from failatlas.bench_core.task_validation import ValidateParams, run
from failatlas.bench_core.tasks import save_tasks
from failatlas.bench_core.tasks.catalog import get_task
from failatlas.store import open_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command


def _task_copy(tmp_path, name: str, edit) -> tuple:
    folder = tmp_path / name
    shutil.copytree(suite_dir("failatlas-mini") / name, folder)
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    edit(spec, folder)
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    store = open_store(tmp_path / "s.duckdb")
    task = load_task(folder / "task.yaml")
    save_tasks(store, [task], source=str(folder))
    return store, task, folder


def _as_rexbench(spec: dict, folder) -> None:
    """The repository becomes the base (the overlay laid over it), with no overlay and no hidden tests."""
    base = folder / "base_repo"
    shutil.copytree(folder / "repo", base)
    for path in (folder / "base").iterdir():
        shutil.copy(path, base / path.name)
    spec["repository"] = {"local_path": "base_repo"}
    spec["masking"] = {}
    spec["implementation"].pop("hidden_tests", None)
    spec["id"] = "mini-rexbench-like"


def test_an_extension_task_without_reference_becomes_valid_with_the_users_tree(tmp_path):
    store, task, folder = _task_copy(tmp_path, "imbalance-reweight", _as_rexbench)
    params = ValidateParams(task_ids=[task.id], sandbox="local", runs_dir=tmp_path / "runs", mutants=0,
                            method_mutants=0)
    [before] = run(store, params).verdicts
    assert before.status == "not-checkable" and "--reference PATH" in before.next_step
    [after] = run(store, params.model_copy(update={"reference": folder / "repo"})).verdicts
    assert after.status == "valid", after.reason
    stored = get_task(store, task.id)
    assert stored.extra["reference"]["tree"]["changed"] == ["model.py", "run.py"]
    assert any(w.startswith("reference-from-user: tree") for w in stored.warnings)
    [again] = run(store, params).verdicts  # kept with the task: no option needed any more
    assert again.status == "valid"


def test_the_reference_as_a_patch_against_the_base(tmp_path):
    store, task, folder = _task_copy(tmp_path, "imbalance-reweight", _as_rexbench)
    work = tmp_path / "work"  # the user's extension as a diff against the base, as `git diff` writes it
    shutil.copytree(folder / "base_repo", work)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", *args], cwd=work, check=True,
                              capture_output=True, text=True).stdout

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")
    shutil.copytree(folder / "repo", work, dirs_exist_ok=True)
    (tmp_path / "ext.patch").write_text(git("diff"))
    params = ValidateParams(task_ids=[task.id], sandbox="local", runs_dir=tmp_path / "runs", mutants=0,
                            method_mutants=0,
                            reference=tmp_path / "ext.patch")
    [verdict] = run(store, params).verdicts
    assert verdict.status == "valid", verdict.reason
    assert get_task(store, task.id).extra["reference"]["tree"]["kind"] == "patch"


def _as_expbench(spec: dict, _folder) -> None:
    spec["run"].pop("command")
    spec.pop("expected_results")
    spec["implementation"].pop("hidden_tests", None)
    spec["id"] = "mini-expbench-like"


def test_a_task_without_command_is_valid_with_the_users_command_and_its_printed_values(tmp_path):
    store, task, _folder = _task_copy(tmp_path, "ridge-cv", _as_expbench)
    params = ValidateParams(task_ids=[task.id], sandbox="local", runs_dir=tmp_path / "runs", mutants=0,
                            method_mutants=0)
    [before] = run(store, params).verdicts
    assert before.status != "valid"
    given = params.model_copy(update={"reference_command": "python3 run.py && cat results.json",
                                      "expected_from_reference": True})
    [after] = run(store, given).verdicts
    assert after.status == "valid", after.reason
    assert "execution" in after.reason.split("code run:")[1]  # E decided by running code
    variant = get_task(store, after.task_id)
    assert {m.name for m in variant.expected_results} == {"test_mse_ols", "test_mse_ridge_cv", "selected_alpha"}
    assert get_task(store, task.id).extra["reference"]["command"] == "python3 run.py && cat results.json"

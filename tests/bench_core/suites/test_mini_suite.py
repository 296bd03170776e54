from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from failatlas.bench_core.prepare import reference_workspace
from failatlas.bench_core.suites import load_suite, load_task, suite_names
from failatlas.bench_core.tasks import ExpectedMetric, TaskKind, TaskSpec
from failatlas.core.errors import InputError, NotFoundError

SUITE = load_suite()
CPU_RUNNABLE = [t.id for t in SUITE if t.run.command and t.resources.gpus == 0]
GPU_TASKS = [t.id for t in SUITE if t.resources.gpus > 0]


def _by_id(task_id: str) -> TaskSpec:
    return next(t for t in SUITE if t.id == task_id)


def _run(command: str, cwd: Path, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - start


def _assert_close(results: dict, expected: list[ExpectedMetric]) -> None:
    for metric in expected:
        assert metric.name in results, f"{metric.name} missing from {sorted(results)}"
        assert np.isclose(results[metric.name], metric.value, rtol=metric.rtol, atol=metric.atol), (
            f"{metric.name}: {results[metric.name]} vs {metric.value} "
            f"(rtol {metric.rtol}, atol {metric.atol})")


def test_the_mini_suite_is_listed_and_unknown_suites_are_not() -> None:
    assert "failatlas-mini" in suite_names()
    with pytest.raises(NotFoundError, match="no-such-suite"):
        load_suite("no-such-suite")


def test_every_task_is_complete() -> None:
    assert len(SUITE) >= 6
    assert len({t.id for t in SUITE}) == len(SUITE)
    for task in SUITE:
        assert task.benchmark == "failatlas-mini"
        assert task.question.rstrip().endswith("?"), task.id
        assert task.expected_conclusion and len(task.expected_conclusion) > 80, task.id
        assert task.design and task.design.constant and task.design.independent and task.design.dependent
        repo = Path(task.repository.local_path)
        assert repo.is_absolute() and repo.is_dir() and repo.name == "repo"
        assert Path(task.source).name == "task.yaml"
        for hidden in task.implementation.hidden_tests:
            assert Path(hidden).is_file() and Path(hidden).parent.name == "hidden_tests"
            assert not Path(hidden).is_relative_to(repo)
        for ref in task.implementation.reference_files:
            assert (repo / ref).is_file(), (task.id, ref)
        if task.kind != TaskKind.DESIGN_ONLY:
            assert task.run.command and task.run.results_file == "results.json" and task.expected_results
            assert task.implementation.hidden_tests and task.implementation.requirements
        assert not list(repo.rglob("results.json")), f"{task.id} ships a results file"
        assert "implementation" in task.judgeable_phases or task.kind == TaskKind.DESIGN_ONLY


def test_the_suite_covers_every_task_shape() -> None:
    kinds = {t.kind for t in SUITE}
    assert {TaskKind.T1, TaskKind.MASKED_FUNCTIONS, TaskKind.EXTENSION, TaskKind.DESIGN_ONLY} <= kinds
    assert any(t.kind == TaskKind.T1 and t.masking.files for t in SUITE)
    n_masked = {len(t.masking.functions) for t in SUITE if t.kind == TaskKind.MASKED_FUNCTIONS}
    assert {1, 2} <= n_masked
    assert all(t.masking.maskable_functions for t in SUITE if t.kind == TaskKind.MASKED_FUNCTIONS)
    (extension,) = [t for t in SUITE if t.kind == TaskKind.EXTENSION]
    assert extension.hints and extension.success and extension.success.kind == "oracle_band"
    assert extension.masking.overlay and Path(extension.masking.overlay).is_dir()
    assert [t.id for t in SUITE if t.kind == TaskKind.DESIGN_ONLY]
    assert len(GPU_TASKS) == 1 and _by_id(GPU_TASKS[0]).resources.gpus == 1


def test_agent_view_holds_no_ground_truth() -> None:
    for task in SUITE:
        view = task.agent_view().model_dump_json()
        assert task.expected_conclusion not in view
        assert "hidden_tests" not in view and "oracle_values" not in view


def test_invalid_task_files_are_input_errors(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "a" / "task.yaml"
    bad_yaml.parent.mkdir()
    bad_yaml.write_text("id: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_task(bad_yaml)
    bad_spec = tmp_path / "b" / "task.yaml"
    bad_spec.parent.mkdir()
    bad_spec.write_text("id: x\nbenchmark: failatlas-mini\nkind: no-such-kind\nquestion: q?\n")
    with pytest.raises(InputError, match="kind"):
        load_task(bad_spec)


@pytest.mark.parametrize("task_id", CPU_RUNNABLE)
def test_reference_reproduces_expected_results(task_id: str, tmp_path: Path) -> None:
    task = _by_id(task_id)
    tree = reference_workspace(task, tmp_path / "reference")
    done, elapsed = _run(task.run.command, tree, timeout=120)
    assert done.returncode == 0, done.stderr
    assert elapsed < 60, f"{task_id} took {elapsed:.1f} s"
    results = json.loads((tree / task.run.results_file).read_text())
    _assert_close(results, task.expected_results)
    if task.success is not None:
        low, high = min(task.success.oracle_values), max(task.success.oracle_values)
        value = results[task.success.metric]
        assert low - task.success.band <= value <= high + task.success.band


def test_design_only_conclusion_is_backed_by_its_reference_study(tmp_path: Path) -> None:
    (task,) = [t for t in SUITE if t.kind == TaskKind.DESIGN_ONLY]
    study = task.extra["reference_run"]
    tree = reference_workspace(task, tmp_path / "reference")
    done, elapsed = _run(study["command"], tree, timeout=120)
    assert done.returncode == 0, done.stderr
    results = json.loads((tree / study["results_file"]).read_text())
    _assert_close(results, [ExpectedMetric.model_validate(m) for m in study["expected_results"]])
    depths = ("1", "2", "3", "4", "6", "8", "12", "none")
    test_accuracy = {d: results[f"test_accuracy_depth_{d}"] for d in depths}
    train_accuracy = [results[f"train_accuracy_depth_{d}"] for d in test_accuracy]
    assert max(test_accuracy, key=test_accuracy.get) == "4"
    assert train_accuracy == sorted(train_accuracy) and train_accuracy[-1] == 1.0
    assert test_accuracy["none"] < test_accuracy["4"] - 0.05


def test_gpu_task_code_compiles_and_its_spec_is_valid() -> None:
    task = _by_id(GPU_TASKS[0])
    assert TaskSpec.model_validate(task.model_dump()) == task
    assert task.kind == TaskKind.MASKED_FUNCTIONS and task.run.command == "python3 run.py"
    hidden = [Path(p) for p in task.implementation.hidden_tests]
    for file in [*Path(task.repository.local_path).rglob("*.py"), *hidden]:
        compile(file.read_text(), str(file), "exec", dont_inherit=True)
    run_source = (Path(task.repository.local_path) / "run.py").read_text()
    assert "get_device_name" in run_source and "--device" in run_source


@pytest.mark.slow
def test_gpu_task_runs_on_the_cpu_when_asked(tmp_path: Path) -> None:
    import torch

    task = _by_id(GPU_TASKS[0])
    tree = reference_workspace(task, tmp_path / "reference")
    done, _ = _run(f"{task.run.command} --device cpu", tree, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads((tree / task.run.results_file).read_text())
    assert results["device"] == "cpu" and results["gpu_name"] is None
    assert {m.name for m in task.expected_results} <= set(results)
    _assert_close(results, task.expected_results)
    (tree / task.run.results_file).unlink()
    env = {k: v for k, v in os.environ.items() if k != "FAILATLAS_DEVICE"}
    plain = subprocess.run(task.run.command, shell=True, cwd=tree, capture_output=True, text=True,
                           timeout=300, env=env)
    if torch.cuda.is_available():
        assert plain.returncode == 0, plain.stderr
        on_gpu = json.loads((tree / task.run.results_file).read_text())
        assert on_gpu["device"] == "cuda" and on_gpu["gpu_name"] == torch.cuda.get_device_name(0)
    else:
        # Without a GPU and without --device cpu the task must refuse rather than silently run on the CPU.
        assert plain.returncode != 0 and "needs a CUDA GPU" in plain.stderr
        assert not (tree / task.run.results_file).exists()

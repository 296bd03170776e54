from __future__ import annotations

from pathlib import Path

import pytest

from failatlas.bench_core.prepare import function_combinations, prepare_workspace, stubbed_correctly
from failatlas.bench_core.suites import load_task, suite_dir
from failatlas.bench_core.tasks import TaskKind
from failatlas.core.errors import InputError


def _task(name: str):
    return load_task(suite_dir("failatlas-mini") / name / "task.yaml")


def test_n1_gives_one_task_per_maskable_function() -> None:
    task = _task("ridge-cv")
    variants = function_combinations(task, 1)
    assert [v.id for v in variants] == ["mini-ridge-cv_0", "mini-ridge-cv_1", "mini-ridge-cv_2"]
    assert [[f.qualname for f in v.masking.functions] for v in variants] == [
        ["RidgeRegression.fit"], ["kfold_indices"], ["cross_validate_alpha"]]
    assert all(v.kind == TaskKind.MASKED_FUNCTIONS for v in variants)
    assert variants[1].extra["base_task_id"] == "mini-ridge-cv"
    assert variants[1].extra["masked_combination"] == [1]
    assert task.masking.functions[0].qualname == "RidgeRegression.fit"


def test_n2_ids_and_stubs(tmp_path: Path) -> None:
    variants = function_combinations(_task("ridge-cv"), 2)
    assert [v.id for v in variants] == ["mini-ridge-cv_0,1", "mini-ridge-cv_0,2", "mini-ridge-cv_1,2"]
    prepared = prepare_workspace(variants[1], tmp_path / "agent")
    assert prepared.task_id == "mini-ridge-cv_0,2"
    assert prepared.masked_functions == ["ridge.py::RidgeRegression.fit", "ridge.py::cross_validate_alpha"]
    source = (Path(prepared.path) / "ridge.py").read_text()
    assert stubbed_correctly(source, "RidgeRegression.fit")
    assert stubbed_correctly(source, "cross_validate_alpha")
    assert not stubbed_correctly(source, "kfold_indices")
    assert "order = np.random.RandomState(seed).permutation(n_samples)" in source


def test_all_three_of_three(tmp_path: Path) -> None:
    (only,) = function_combinations(_task("kmeans-init"), 3)
    assert only.id == "mini-kmeans-init_0,1,2"
    prepared = prepare_workspace(only, tmp_path / "agent")
    source = (Path(prepared.path) / "kmeans.py").read_text()
    assert all(stubbed_correctly(source, q) for q in ("random_init", "kmeanspp_init", "KMeans.fit"))
    assert stubbed_correctly(source, "squared_distances") is False


def test_bad_n_or_no_maskable_functions() -> None:
    with pytest.raises(InputError, match="between 1 and 3"):
        function_combinations(_task("ridge-cv"), 0)
    with pytest.raises(InputError, match="between 1 and 3"):
        function_combinations(_task("ridge-cv"), 4)
    with pytest.raises(InputError, match="no maskable functions"):
        function_combinations(_task("logreg-scaling"), 1)

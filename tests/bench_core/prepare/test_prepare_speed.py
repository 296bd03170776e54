"""The faster prepare (issue 32, item 8: normalised git objects and task files remembered by content, HEAD read
from the repository's files, commits counted by the leak scan) builds the same trees as the code before it: on real
AutoExperiment tasks of the shared data, every file, the commit id and every git object are identical, with the
remembered texts cold and warm; and a leak is still found when its object's text is remembered."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from failatlas.bench_core import prepare as new
from failatlas.bench_core.prepare import GroundTruthLeakError, leaks
from failatlas.bench_core.prepare.gitrepo import git
from failatlas.bench_core.prepare.workspace import writable
from failatlas.bench_core.tasks import TaskImportParams
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.bench_core.tasks.catalog import get_task

ROOT = Path(__file__).resolve().parents[3]
TASKS = ("autoexperiment-2303.11932", "autoexperiment-2303.11932_0", "autoexperiment-2303.11932_0,1")


def _bench():
    spec = importlib.util.spec_from_file_location("prepare_speed", ROOT / "benchmarks" / "prepare_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def old(tmp_path_factory: pytest.TempPathFactory):
    """bench_core/prepare as it was before the speed-up, read from git."""
    bench = _bench()
    root = tmp_path_factory.mktemp("old")
    name = bench.old_package(bench.BASE, root, ROOT)
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(name, None)


def test_prepared_trees_are_byte_identical_to_the_old_code(old, store, shared_data: Path, tmp_path: Path):
    import_tasks(store, TaskImportParams(paths=[shared_data / "autoexperiment" / "MLRC"]))
    digest = _bench().tree_digest
    leaks._NORMALISED.texts.clear()
    for round_ in ("cold", "warm"):
        for task_id in TASKS:
            task = get_task(store, task_id)
            before = old.prepare_workspace(task, tmp_path / round_ / "old" / task_id)
            after = new.prepare_workspace(task, tmp_path / round_ / "new" / task_id)
            assert after.model_dump(exclude={"path"}) == before.model_dump(exclude={"path"})
            # the one change since: a tree copied from a read-only source is made owner-writable (issue 40)
            writable(Path(before.path))
            assert digest(Path(after.path)) == digest(Path(before.path)), task_id
            assert after.commit == git(Path(after.path), "rev-parse", "HEAD").decode().strip()
    assert leaks._NORMALISED.texts  # the warm round read remembered texts


def test_a_leak_is_found_from_a_remembered_object(tmp_path: Path):
    from tests.bench_core.prepare.test_workspace import _toy_task  # the masking tests' own toy task

    task, repo = _toy_task(tmp_path, functions=[{"path": "core.py", "qualname": "secret_formula"}])
    (repo / "NOTES.md").write_text(
        "Spoiler:\nthe toy formula ALWAYS returns forty-two plus a large\nconstant offset.\n")
    other = task.model_copy(update={"expected_conclusion": "Another task's conclusion, which NOTES.md does not hold."})
    new.prepare_workspace(other, tmp_path / "first", repo=repo)  # NOTES.md's blob text is now remembered
    oid = git(tmp_path / "first", "rev-parse", "HEAD:NOTES.md").decode().strip()
    assert oid in leaks._NORMALISED.texts
    with pytest.raises(GroundTruthLeakError, match=f"expected conclusion found in git blob {oid}"):
        new.prepare_workspace(task, tmp_path / "second", repo=repo)
    assert not (tmp_path / "second").exists()

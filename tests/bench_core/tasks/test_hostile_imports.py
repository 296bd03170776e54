"""Hostile task bundles (review B, sections 1 to 4): links out of the import folder, FIFOs and devices, ids shaped
like paths, a papers file found beside a bundle, one id in two items. Each is an InputError naming the file, and
nothing is written."""

from __future__ import annotations

import os
import shutil
import signal

import pytest
from pydantic import ValidationError

from failatlas.bench_core.suites import suite_dir
from failatlas.bench_core.tasks import TaskImportParams, run
from failatlas.bench_core.tasks.catalog import list_tasks
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.store import open_store
from tests.conftest import SHARED_DATA

MLRC = SHARED_DATA / "autoexperiment" / "MLRC"
PAPER = "2205.00048"


@pytest.fixture
def no_hang():
    """A hang (a FIFO opened for reading) fails the test instead of stopping the suite."""
    def timeout(*_):
        raise TimeoutError("the import hung")
    old = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _import(tmp_path, *paths, **more):
    store = open_store(tmp_path / "s.duckdb")
    try:
        run(store, TaskImportParams(paths=list(paths), **more))
    finally:
        assert list_tasks(store) == []
    return store


def test_an_instructions_file_linked_out_of_the_import_folder_is_refused(tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("# secret\nroot:x:0:0\n")
    folder = tmp_path / "bundle" / "linkpw"
    folder.mkdir(parents=True)
    (folder / "instructions.md").symlink_to(outside)
    with pytest.raises(InputError, match="instructions.md: is a link out of the import folder"):
        _import(tmp_path, tmp_path / "bundle")


def test_a_fifo_met_while_walking_is_refused_not_waited_on(tmp_path, no_hang):
    folder = tmp_path / "bundle"
    folder.mkdir()
    os.mkfifo(folder / "tasks.jsonl")
    with pytest.raises(InputError, match=r"tasks.jsonl: is not a regular file \(a FIFO\)"):
        _import(tmp_path, folder)


def test_a_device_is_refused(tmp_path):
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "18244.json").symlink_to("/dev/zero")
    with pytest.raises(InputError, match="18244.json: is a link out of the import folder"):
        _import(tmp_path, folder)
    with pytest.raises(InputError, match=r"is not a regular file \(a character device\)"):
        _import(tmp_path, "/dev/zero")


def test_a_task_yaml_that_is_a_link_does_not_move_its_task_folder(tmp_path):
    real = tmp_path / "elsewhere" / "km"
    shutil.copytree(suite_dir("failatlas-mini") / "kmeans-init", real)
    task = tmp_path / "bundle" / "km"
    task.mkdir(parents=True)
    (task / "task.yaml").symlink_to(real / "task.yaml")
    with pytest.raises(InputError, match="task.yaml: is a link out of the import folder"):
        _import(tmp_path, tmp_path / "bundle")


def test_a_task_id_shaped_like_a_path_is_refused():
    base = {"benchmark": "rexbench", "kind": "extension", "question": "q"}
    for bad in ("x/../../ESCAPED", "a/./b", "a//b", "a/", "/etc", "a\\b", "a\x00b"):
        with pytest.raises(ValidationError):
            TaskSpec.model_validate({**base, "id": bad})
    for good in ("mini-ridge-cv", "autoexperiment-2205.00048", "exp-bench:foo/bar", "a..b"):
        assert TaskSpec.model_validate({**base, "id": good}).id == good


@pytest.fixture
def rows(tmp_path):
    """The real n=1 rows of AutoExperiment, copied; the papers file goes one folder up, as it is found."""
    if not MLRC.is_dir():
        pytest.fail(f"the real data is missing: {MLRC}")
    folder = tmp_path / "bench" / "tasks"
    folder.mkdir(parents=True)
    shutil.copy(MLRC / "mlrc_n=1.jsonl", folder)
    return folder


def test_a_papers_file_value_the_task_model_refuses_is_an_error(tmp_path, rows):
    (tmp_path / "bench" / "failatlas-papers.yaml").write_text(f'"{PAPER}":\n  allow_hosts: ["*"]\n')
    with pytest.raises(InputError, match=r"failatlas-papers.yaml field '2205.00048\.resources\.allow_hosts'"):
        _import(tmp_path, rows)


def test_a_papers_file_found_beside_a_bundle_mounts_only_its_own_folder(tmp_path, rows):
    papers = tmp_path / "bench" / "failatlas-papers.yaml"
    (tmp_path / "bench" / "inside").mkdir()
    for data in ("/etc", "../../..", "link"):
        (tmp_path / "bench" / "link").unlink(missing_ok=True)
        (tmp_path / "bench" / "link").symlink_to("/etc")
        papers.write_text(f'"{PAPER}":\n  data: {{x: "{data}"}}\n')
        with pytest.raises(InputError, match="2205.00048.data.x") as bad:
            _import(tmp_path, rows)
        assert "--papers" in bad.value.hint
    papers.write_text(f'"{PAPER}":\n  data: {{x: inside}}\n')
    store = open_store(tmp_path / "ok.duckdb")
    assert run(store, TaskImportParams(paths=[rows])).n_tasks > 1
    papers.write_text(f'"{PAPER}":\n  data: {{x: /etc}}\n')  # the user's own file, named: anywhere
    assert run(store, TaskImportParams(paths=[rows], papers=papers)).n_tasks > 1


def test_a_papers_file_nested_too_deeply_is_an_error_naming_it(tmp_path, rows):
    (tmp_path / "bench" / "failatlas-papers.yaml").write_text("x: " + "[" * 20000 + "]" * 20000 + "\n")
    with pytest.raises(InputError, match="failatlas-papers.yaml"):
        _import(tmp_path, rows)


def test_one_id_in_two_items_of_one_import_is_refused_naming_both(tmp_path):
    for name in ("a", "b"):
        shutil.copytree(suite_dir("failatlas-mini") / "kmeans-init", tmp_path / name / "km")
    with pytest.raises(InputError, match=r"b/km/task.yaml: task id .* is also the id of a task in .*a/km/task.yaml"):
        _import(tmp_path, tmp_path / "a", tmp_path / "b")

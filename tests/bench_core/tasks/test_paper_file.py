"""Issue 52: a per-paper resource file beside the benchmark overrides what the rows declare (GPUs, memory, time,
network, hosts, environment, data), on every task of the paper and on no other; a bad file names file, line and
field, and nothing is imported."""

from __future__ import annotations

import shutil

import pytest

from failatlas.bench_core.tasks import TaskImportParams, run
from failatlas.bench_core.tasks.catalog import get_task, list_tasks
from failatlas.bench_core.tasks.paper_file import data_of
from failatlas.core.errors import InputError
from failatlas.store import open_store
from tests.conftest import SHARED_DATA

MLRC = SHARED_DATA / "autoexperiment" / "MLRC"


@pytest.fixture
def rows(tmp_path):
    """The real n=1 rows of AutoExperiment in a folder of the user's (the shared copy is read-only)."""
    if not MLRC.is_dir():
        pytest.fail(f"the real data is missing: {MLRC}")
    folder = tmp_path / "MLRC"
    folder.mkdir()
    shutil.copy(MLRC / "mlrc_n=1.jsonl", folder)
    return folder


def test_the_file_beside_the_rows_sets_every_task_of_its_paper(tmp_path, rows):
    (tmp_path / "ml1m").mkdir()
    (tmp_path / "failatlas-papers.yaml").write_text(
        '"2205.00048":\n  gpus: 2\n  memory_gb: 24\n  timeout_s: 1800\n  network: registries\n'
        '  allow_hosts: [files.grouplens.org]\n  environment: prebuilt\n  data: {ml1m: ml1m}\n')
    store = open_store(tmp_path / "s.duckdb")
    run(store, TaskImportParams(paths=[rows / "mlrc_n=1.jsonl"]))
    mine = [get_task(store, r["id"]) for r in list_tasks(store, paper="2205.00048")]
    assert len(mine) == 7
    for task in mine:
        r = task.resources
        assert (r.gpus, r.memory_gb, r.time_limit_s, r.network, r.allow_hosts, r.environment, task.run.timeout_s) \
            == (2, 24, 1800, "registries", ["files.grouplens.org"], "prebuilt", 1800)
        assert task.data == {"ml1m": None} and any(w.startswith("resources-from-paper-file") for w in task.warnings)
    assert data_of(mine) == {"ml1m": (tmp_path / "ml1m").resolve()}
    other = get_task(store, list_tasks(store, paper="2303.11932")[0]["id"])
    assert other.resources.gpus == 0 and "paper_file" not in other.extra


def test_a_bad_entry_names_the_file_line_and_field_and_nothing_is_imported(tmp_path, rows):
    papers = tmp_path / "mine.yaml"
    papers.write_text('"2303.11932":\n  gpus: 1\n"2205.00048":\n  gpus: -1\n')
    store = open_store(tmp_path / "s.duckdb")
    with pytest.raises(InputError) as bad:
        run(store, TaskImportParams(paths=[rows], papers=papers))
    assert f"{papers.resolve()}:3 field '2205.00048.gpus'" in bad.value.one_line()
    assert list_tasks(store) == []
    papers.write_text('"2205.00048":\n  data: {ml1m: nowhere}\n')
    with pytest.raises(InputError, match="data ml1m: .*nowhere does not exist"):
        run(store, TaskImportParams(paths=[rows], papers=papers))

"""The `tasks.import` stage on a real DuckDB file: params in, result out, one `stage_runs` row with the writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failatlas.bench_core.suites import load_suite, suite_dir
from failatlas.bench_core.tasks import TASK_IMPORTERS, TaskImportParams, get_task, run
from failatlas.core.errors import InputError


def _runs(store) -> list[dict]:
    return store.query_dicts("SELECT id, params, status, rows FROM stage_runs WHERE stage = 'tasks.import'"
                             " ORDER BY started_at")


def test_an_import_records_one_stage_run_with_its_counts(store, iclr2024: Path):
    first = run(store, TaskImportParams(paths=[iclr2024 / "18439.json"]))
    again = run(store, TaskImportParams(paths=[iclr2024 / "18439.json"], format="expbench"))
    rows = _runs(store)
    assert [r["id"] for r in rows] == [first.stage_run_id, again.stage_run_id]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert [json.loads(r["rows"])["tasks"] for r in rows] == [3, 0]
    assert json.loads(rows[1]["params"]) == {"paths": [str((iclr2024 / "18439.json").resolve())],
                                             "format": "expbench", "options": {}, "papers": None}


def test_a_malformed_file_is_recorded_as_a_failed_run_and_writes_no_task(store, iclr2024: Path, tmp_path: Path):
    (tmp_path / "a.json").write_text((iclr2024 / "18439.json").read_text())
    (tmp_path / "b.json").write_text('{"questions": [{"method": "no question"}]}')
    with pytest.raises(InputError, match="question"):
        run(store, TaskImportParams(paths=[tmp_path]))
    assert store.query("SELECT count(*) FROM tasks")[0][0] == 0
    assert [r["status"] for r in _runs(store)] == ["failed"]


def test_the_bundled_suite_imports_through_the_failatlas_importer(store):
    assert TASK_IMPORTERS.detect(suite_dir("failatlas-mini")) == "failatlas"
    result = run(store, TaskImportParams(paths=[suite_dir("failatlas-mini")]))
    expected = load_suite("failatlas-mini")
    assert (len(result.files), result.n_tasks, result.inserted) == (1, len(expected), len(expected))
    assert all(get_task(store, task.id) == task for task in expected)
    one_task = Path(expected[0].source)  # a task.yaml named alone imports its one task, unchanged
    again = run(store, TaskImportParams(paths=[one_task]))
    assert (again.files[0].format, again.unchanged, again.n_tasks) == ("failatlas", 1, 1)


def test_a_rexbench_folder_with_a_task_yaml_is_not_taken_for_a_failatlas_task(fixtures: Path):
    assert TASK_IMPORTERS.detect(fixtures / "rexbench" / "cogs") == "rexbench"
    assert TASK_IMPORTERS.detect(fixtures / "rexbench") is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden_tests", "../../../../etc/passwd"),  # '..' out of the task folder
        ("hidden_tests", "/etc/passwd"),  # an absolute path
        ("hidden_tests", "escape/passwd"),  # a link inside the folder that points outside it
        ("local_path", "../"),  # the repository handed to the agent: the folder above
        ("overlay", "escape"),
    ],
)
def test_a_task_file_cannot_name_host_files_outside_its_folder(store, tmp_path: Path, field: str, value: str):
    """A hostile task.yaml must not get host files copied into the sandbox or the agent's workspace."""
    source = Path(load_suite("failatlas-mini")[0].source)
    task = tmp_path / "hostile-task"
    task.mkdir()
    (task / "escape").symlink_to("/etc", target_is_directory=True)
    original = source.read_text()  # imbalance-reweight: it names hidden tests, a repository and an overlay
    text = {
        "hidden_tests": lambda: original.replace("hidden_tests: [", f"hidden_tests: [{value}, ", 1),
        "local_path": lambda: original.replace("local_path: repo", f"local_path: {value}", 1),
        "overlay": lambda: original.replace("overlay: base", f"overlay: {value}", 1),
    }[field]()
    assert text != original
    (task / "task.yaml").write_text(text)
    with pytest.raises(InputError, match="outside the task folder|relative to the task folder") as err:
        run(store, TaskImportParams(paths=[task], format="failatlas"))
    assert str(task / "task.yaml") in str(err.value)
    assert store.query("SELECT count(*) FROM tasks")[0][0] == 0

"""The task catalog over a real DuckDB file: upsert by stable id, all-or-nothing imports, lookups, filters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from failatlas.bench_core.tasks import (
    TASK_IMPORTERS,
    TaskImportParams,
    TaskKind,
    get_task,
    list_tasks,
    public_view,
    run,
    save_tasks,
)
from failatlas.core.errors import ConfigError, InputError, NotFoundError


def _count(store) -> int:
    return store.query("SELECT count(*) FROM tasks")[0][0]


def test_importing_the_real_folder_twice_upserts(store, iclr2024: Path):
    first = run(store, TaskImportParams(paths=[iclr2024]))
    assert (len(first.files), first.n_tasks, first.inserted) == (25, 206, 206)
    assert first.by_kind == {"T1": 97, "T2": 55, "T3": 54}
    assert first.warnings["missing-design"] == 5
    assert first.summary().startswith("25 file(s), 206 task(s) (206 new, 0 updated, 0 unchanged)")
    again = run(store, TaskImportParams(paths=[iclr2024]))
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 206)
    assert _count(store) == 206
    assert store.query("SELECT sum(n_warnings) FROM tasks")[0][0] == first.n_warnings == 31 + 206 + 11  # index


def test_a_changed_task_is_updated_in_place(store, iclr2024: Path, tmp_path: Path):
    path = tmp_path / "iclr2024" / "18439.json"
    path.parent.mkdir()
    shutil.copy(iclr2024 / "18439.json", path)
    assert run(store, TaskImportParams(paths=[path])).inserted == 3
    data = json.loads(path.read_text())
    data["questions"][1]["expected_outcome"] = "a revised conclusion"
    path.write_text(json.dumps(data))
    report = run(store, TaskImportParams(paths=[path]))
    assert (report.inserted, report.updated, report.unchanged) == (0, 1, 2)
    (changed,) = report.files[0].updated
    assert get_task(store, changed).expected_conclusion == "a revised conclusion"
    assert _count(store) == 3


def test_a_malformed_file_leaves_the_store_unchanged(store, iclr2024: Path, tmp_path: Path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(iclr2024 / "18439.json", folder / "18439.json")
    (folder / "19999.json").write_text('{"questions": [{"question": "ok"}, {"method": "no question"}]}')
    with pytest.raises(InputError) as err:
        run(store, TaskImportParams(paths=[folder]))
    assert err.value.path == str(folder / "19999.json") and err.value.field == "questions[1].question"
    assert _count(store) == 0
    (folder / "19999.json").write_text('{"questions": [')
    with pytest.raises(InputError, match="invalid JSON"):
        run(store, TaskImportParams(paths=[folder]))
    assert _count(store) == 0


def test_save_tasks_is_all_or_nothing(store, iclr2024: Path):
    tasks = TASK_IMPORTERS.load(iclr2024 / "18439.json", "expbench").records
    with pytest.raises(InputError, match="twice"):
        save_tasks(store, [*tasks, tasks[0]], source="dup")
    assert _count(store) == 0
    report = save_tasks(store, tasks, source="18439")
    assert len(report.inserted) == 3 and report.by_kind == {"T1": 3}


def test_get_task_round_trips_and_misses_with_a_hint(store, iclr2024: Path):
    with pytest.raises(NotFoundError, match="no task 'expbench-nope'") as err:
        get_task(store, "expbench-nope")
    assert "catalog is empty" in err.value.hint
    (task, *_) = TASK_IMPORTERS.load(iclr2024 / "18277.json", "expbench").records
    save_tasks(store, [task], source="t")
    assert get_task(store, task.id) == task
    with pytest.raises(NotFoundError) as err:
        get_task(store, task.id[:-1])
    assert task.id in err.value.hint


def test_list_filters_by_benchmark_kind_and_paper(store, iclr2024: Path, fixtures: Path):
    report = run(store, TaskImportParams(paths=[iclr2024, fixtures / "autoexperiment", fixtures / "rexbench"]))
    assert report.n_tasks == 206 + 3 + 2
    assert {r["id"] for r in list_tasks(store, benchmark="rexbench")} == {"rexbench-othello", "rexbench-cogs"}
    assert len(list_tasks(store, benchmark="autoexperiment", kind="masked_functions")) == 3
    t3 = list_tasks(store, kind="t3", paper="18277")
    assert [(r["kind"], r["paper_id"], r["n_warnings"]) for r in t3] == [("T3", "18277", 2)]  # + index: ...
    assert len(list_tasks(store, kind=TaskKind.T2, paper="18277")) == 5
    assert list_tasks(store, paper="no-such-paper") == []
    with pytest.raises(ConfigError, match="unknown task kind"):
        list_tasks(store, kind="T9")


def test_public_view_hides_ground_truth(iclr2024: Path):
    task = TASK_IMPORTERS.load(iclr2024 / "18439.json", "expbench").records[0]
    public = public_view(task)
    assert public["question"] == task.question and public["warnings"] == task.warnings
    assert not {"design", "expected_conclusion", "implementation", "masking", "extra"} & set(public)
    full = public_view(task, ground_truth=True)
    assert full["expected_conclusion"] == task.expected_conclusion and full["design"]

"""EXP-Bench's paper index: each task's repository, title and GPU needs, found beside the venue folder or named
with --index; a malformed index is refused by line."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.tasks import TASK_IMPORTERS, TaskImportParams, TaskKind, get_task, list_tasks, run
from failatlas.bench_core.tasks.importers._common import Warnings, warning_code
from failatlas.bench_core.tasks.importers._expbench_fields import gpu_need
from failatlas.cli import app
from failatlas.core.errors import InputError


@pytest.fixture(scope="module")
def index_rows(iclr2024: Path) -> dict[str, dict]:
    lines = (iclr2024.parent / "iclr2024_index.jsonl").read_text().splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


def _codes(task) -> list[str]:
    return [warning_code(w) for w in task.warnings]


def test_all_206_tasks_take_their_repository_from_the_index_found_beside_them(store, iclr2024, index_rows):
    report = run(store, TaskImportParams(paths=[iclr2024]))
    assert report.n_tasks == 206 and report.warnings["index"] == 206 and "no-repository" not in report.warnings
    tasks = [get_task(store, row["id"]) for row in list_tasks(store, benchmark="expbench")]
    index_file = (iclr2024.parent / "iclr2024_index.jsonl").resolve()
    for task in tasks:
        paper = index_rows[task.paper.id]
        assert task.repository.url == paper["code_url"] and task.repository.url.startswith("https://github.com/")
        assert task.paper.title == paper["title"] and task.paper.url == paper["url"]
        assert task.extra["reproduce_difficulty"] == paper["reproduce_difficulty"]
        assert task.extra["index"]["file"] == str(index_file)
        assert any(w.startswith("index: ") and str(index_file) in w for w in task.warnings)
        assert task.run.agent_script is (task.kind in (TaskKind.T1, TaskKind.T2))
        runnable = task.kind != TaskKind.T3 and task.expected_conclusion is not None
        assert ("execution" in task.judgeable_phases) is runnable
    gpus = {t.paper.id: t.resources.gpus for t in tasks}
    assert (gpus["18439"], gpus["18244"], gpus["17595"], gpus["18889"], gpus["19292"]) == (0, 1, 8, 2, 2)
    assert Counter(t.run.agent_script for t in tasks) == {True: 97 + 55, False: 54}
    assert store.query("SELECT count(*) FROM tasks WHERE gpus > 0")[0][0] == 206 - 3  # 18439's three need none


def test_an_index_named_with_the_option_is_used_silently(store, iclr2024, tmp_path):
    moved = tmp_path / "mine" / "18244.json"
    moved.parent.mkdir()
    shutil.copy(iclr2024 / "18244.json", moved)
    (alone,) = {t.repository.url for t in TASK_IMPORTERS.load(moved, "expbench").records}
    assert alone is None
    assert {"no-repository"} <= set(_codes(TASK_IMPORTERS.load(moved, "expbench").records[0]))
    report = run(store, TaskImportParams(paths=[moved], options={"index": iclr2024.parent / "iclr2024_index.jsonl"}))
    assert report.n_tasks == 10 and "index" not in report.warnings and "no-repository" not in report.warnings
    task = get_task(store, report.files[0].inserted[0])
    assert task.repository.url == "https://github.com/Hank0626/PDF" and task.resources.gpus == 1


def test_the_cli_flag_names_the_index(tmp_path, iclr2024):
    runner = CliRunner(env={"FAILATLAS_NO_PROGRESS": "1"})
    result = runner.invoke(app, ["--db", str(tmp_path / "s.duckdb"), "tasks", "import", str(iclr2024), "--index",
                                 str(iclr2024.parent / "iclr2024_index.jsonl")])
    assert result.exit_code == 0, result.output
    assert "206 task(s)" in result.stdout and "index 206" not in result.stdout and "no-repository" not in result.stdout


def _index(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_papers_the_index_lacks_or_gives_no_url_still_import_with_a_warning(iclr2024, tmp_path):
    venue = tmp_path / "iclr2024"
    venue.mkdir()
    for paper in ("18439", "18244", "17595"):
        shutil.copy(iclr2024 / f"{paper}.json", venue)
    _index(tmp_path / "iclr2024_index.jsonl", [
        {"id": "18439", "code_url": "github.com/apple/ml-calibration", "title": "Smooth ECE"},
        {"id": 18244, "code_url": "N/A", "reproduce_difficulty": {"resource_requirements": "8 x A100"}}])
    calibration = TASK_IMPORTERS.load(venue / "18439.json", "expbench").records[0]
    assert calibration.repository.url == "github.com/apple/ml-calibration" and calibration.paper.title == "Smooth ECE"
    assert _codes(calibration) == ["index", "gpus-unknown"]
    pdf = TASK_IMPORTERS.load(venue / "18244.json", "expbench").records[0]
    assert pdf.repository.url is None and pdf.resources.gpus == 8
    assert [w for w in pdf.warnings if w.startswith("no-repository")] == [
        "no-repository: the index names no code_url for paper 18244: the repository is unknown"]
    absent = TASK_IMPORTERS.load(venue / "17595.json", "expbench").records
    assert all(t.repository.url is None and "no-repository" in _codes(t) for t in absent)
    assert all("17595 is not in the index" in " ".join(t.warnings) for t in absent)


def test_two_indexes_that_could_be_meant_ask_for_the_option(iclr2024, tmp_path):
    venue = tmp_path / "iclr2024"
    venue.mkdir()
    shutil.copy(iclr2024 / "18439.json", venue)
    for name in ("iclr2024_a_index.jsonl", "iclr2024_b_index.jsonl"):
        _index(tmp_path / name, [{"id": "18439", "code_url": f"github.com/o/{name[9]}"}])
    with pytest.raises(InputError, match="2 paper indexes") as err:
        TASK_IMPORTERS.load(venue / "18439.json", "expbench")
    assert "--index" in err.value.hint
    _index(tmp_path / "iclr2024_index.jsonl", [{"id": "18439", "code_url": "github.com/o/exact"}])
    assert TASK_IMPORTERS.load(venue / "18439.json", "expbench").records[0].repository.url == "github.com/o/exact"


@pytest.mark.parametrize(("line", "field"), [
    ('{"id": "1", "code_url": "https://github.com/a/b",}', None),
    ('["18439", "https://github.com/a/b"]', None),
    ('{"code_url": "https://github.com/a/b"}', "id"),
    ('{"id": true}', "id"),
    ('{"id": "18439", "code_url": "https://github.com/a/c"}', "id"),  # listed twice
    ('{"id": "2", "code_url": 42}', "code_url"),
    ('{"id": "2", "code_url": "ext::sh -c id"}', "code_url"),
    ('{"id": "2", "code_url": "file:///etc"}', "code_url"),
    ('{"id": "2", "code_url": "--upload-pack=x"}', "code_url"),
    ('{"id": "2", "title": ["x"]}', "title"),
])
def test_a_malformed_index_line_is_named_by_file_line_and_field(iclr2024, tmp_path, line, field):
    index = _index(tmp_path / "x_index.jsonl", [{"id": "18439", "code_url": "https://github.com/a/b"}, "", line])
    with pytest.raises(InputError) as err:
        TASK_IMPORTERS.load(iclr2024 / "18439.json", "expbench", {"index": index})
    assert (err.value.path, err.value.line, err.value.field) == (str(index), 3, field)


def test_a_missing_index_file_is_an_input_error(iclr2024, tmp_path):
    with pytest.raises(InputError, match="cannot read") as err:
        TASK_IMPORTERS.load(iclr2024 / "18439.json", "expbench", {"index": tmp_path / "nope.jsonl"})
    assert err.value.path == str(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(("gpus", "count", "code"), [
    ({"type": "NVIDIA", "amount": 8}, 8, None),
    ({"type": "NVIDIA", "amount": "1"}, 1, None),
    ({"type": "NVIDIA V100 or A100", "amount": "2-8"}, 2, None),
    ({"type": "any", "amount": "1 or more"}, 1, None),
    ({"count": 4, "type": "NVIDIA"}, 4, None),
    ([{"type": "NVIDIA", "amount": 1}, {"type": "A100", "amount": 2}], 3, None),
    ("1-4 NVIDIA GPUs (V100, A100, etc.)", 1, None),
    ("GPUs: 1-4 NVIDIA A100 or equivalent, 32GB+ RAM recommended", 1, None),
    ("8 x A100", 8, None),
    ("1x NVIDIA GPU (recommended for training agents)", 1, None),
    ("At least one GPU (specific type not mentioned)", 1, None),
    ("Single GPU (NVIDIA with CUDA 11.4), at least 8GB VRAM", 1, None),
    ("None", 0, None),
    ("CPU only", 0, None),
    ("A100-SXM-80GB", 1, "gpus-guessed"),
    ("16GB GPU memory for editing a 768x768 image", 1, "gpus-guessed"),
    ({"type": "NVIDIA", "amount": None}, 1, "gpus-guessed"),
    ("N/A", 0, "gpus-unknown"),
    ("No specific hardware requirements mentioned", 0, "gpus-unknown"),
    ({"type": "NVIDIA", "amount": 1000}, 0, "gpus-unknown"),
    ({"type": "NVIDIA", "amount": -1}, 1, "gpus-guessed"),
    (True, 0, "gpus-unknown"),
])
def test_gpu_needs_follow_the_documented_rule(gpus, count, code):
    w = Warnings()
    assert gpu_need({"resource_requirements": {"GPUs": gpus}}, w) == count
    assert [warning_code(x) for x in w.items] == ([code] if code else [])


def test_gpu_needs_missing_or_given_as_one_text():
    w = Warnings()
    assert gpu_need(None, w) == 0 and [warning_code(x) for x in w.items] == ["gpus-unknown"]
    assert gpu_need({"resource_requirements": "1-2 GPUs (NVIDIA RTX 2080 or better), 16GB RAM"}, Warnings()) == 1

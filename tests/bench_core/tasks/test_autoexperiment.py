"""AutoExperiment importer on a fixture written from the benchmark's documented row format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failatlas.bench_core.tasks import TASK_IMPORTERS, TaskKind
from failatlas.core.errors import InputError


@pytest.fixture
def rows_file(fixtures: Path) -> Path:
    return fixtures / "autoexperiment" / "mlrc_n_k.jsonl"


def test_rows_become_masked_function_tasks_with_combined_ids(rows_file: Path):
    tasks = TASK_IMPORTERS.load(rows_file, "autoexperiment").records
    assert [t.id for t in tasks] == [
        "autoexperiment-2205.00048_0,1",
        "autoexperiment-2205.00048_2",
        "autoexperiment-2205.00048_1",
    ]
    assert [t.extra["combined_id"] for t in tasks] == ["2205.00048_0,1", "2205.00048_2", "2205.00048_1"]
    first = tasks[0]
    assert first.kind == TaskKind.MASKED_FUNCTIONS and first.benchmark == "autoexperiment"
    assert [(f.path, f.qualname) for f in first.masking.functions] == [
        ("src/utils/evaluation_functions/fairness_metrics.py", "expected_exposure"),
        ("src/utils/evaluation_functions/fairness_metrics.py", "ii_f"),
    ]
    assert first.run.command.splitlines() == [
        "echo Experiment 1",
        "python src/run_metric.py --metric II-F --seed 0",
        "echo Experiment 2",
        "python src/run_metric.py --metric GG-F --seed 0",
    ]
    assert first.paper.arxiv_id == "2205.00048" and first.repository.local_path == "2205.00048/code"
    assert (rows_file.parent / first.repository.local_path / first.masking.functions[0].path).is_file()
    assert first.extra["func_details"][0]["line_start"] == 7 and first.extra["environment"] == "jme"
    assert "expected_exposure in file" in first.instructions
    located = first.masking.functions[0]
    assert (located.line_start, located.line_end) == (6, 10)  # header_line, the `def` line, to line_end
    assert located.docstring.startswith("Expected exposure of every item") and first.materials == {}
    assert first.warnings == []


def test_gold_results_get_per_metric_tolerances(rows_file: Path):
    first, python_quoted, nested = TASK_IMPORTERS.load(rows_file, "autoexperiment").records
    got = {m.name: (m.value, m.rtol, m.atol, m.experiment) for m in first.expected_results}
    assert got == {
        "Experiment 1.II-F": (0.0055, 0.02, 0.0, "Experiment 1"),  # the row's default
        "Experiment 2.GG-F": (0.0013, 0.0, 0.002, "Experiment 2"),  # this metric's own
    }
    assert [(m.name, m.rtol) for m in python_quoted.expected_results] == [("Experiment 1.GG-F", 0.05)]
    assert [m.name for m in nested.expected_results] == [
        "Experiment 1.II-F",
        "Experiment 1.per_seed[0]",
        "Experiment 1.per_seed[1]",
        "Experiment 1.per_seed[2]",
    ]
    assert "execution" in first.judgeable_phases


def test_non_numeric_gold_is_kept_and_reported(tmp_path: Path):
    path = tmp_path / "rows.jsonl"
    path.write_text(
        json.dumps(
            {
                "combined_id": "2303.11932_",
                "experiments": "Experiment 1: which is best?",
                "solution": "python run.py",
                "results": {"Experiment 1": "B-cos"},
            }
        )
        + "\n"
    )
    (task,) = TASK_IMPORTERS.load(path, "autoexperiment").records
    assert task.id == "autoexperiment-2303.11932" and task.masking.functions == []
    assert task.kind == TaskKind.FULL_CODE and task.extra["combined_id"] == "2303.11932_"
    assert task.extra["non_numeric_results"] == {"Experiment 1": "B-cos"}
    codes = {w.split(":")[0] for w in task.warnings}
    assert codes == {"non-numeric-result", "repository-unavailable"}  # no 2303.11932/code beside the rows


@pytest.mark.parametrize(
    ("row", "field", "line"),
    [
        ({"func_ids": "0", "experiments": "e", "results": {"Experiment 1": 1}}, "paper_id", 2),
        (
            {"paper_id": "2205.00048", "func_ids": "0", "experiments": "e", "results": {"Experiment 1": 1}},
            "func_details",
            2,
        ),
        ({"paper_id": "2205.00048", "func_ids": "", "experiments": "e"}, "results", 2),
        (
            {"paper_id": "2205.00048", "func_ids": "", "experiments": "e", "results": "{not json"},
            "results",
            2,
        ),
        (
            {"combined_id": "2205.00048_1", "func_ids": "2", "experiments": "e", "results": {"E": 1}},
            "combined_id",
            2,
        ),
        (
            {
                "paper_id": "p",
                "func_ids": "0",
                "func_details": [{"name": "f"}],
                "experiments": "e",
                "results": {"E": 1},
            },
            "func_details[0].file",
            2,
        ),
        (
            {
                "paper_id": "p",
                "func_ids": "",
                "experiments": "e",
                "results": {"E": 1},
                "tolerances": {"E": {"rtol": -1}},
            },
            "tolerances",
            2,
        ),
        (
            {
                "paper_id": "p",
                "func_ids": "0",
                "func_details": [{"name": "f", "file": "a.py", "header_line": "four"}],
                "experiments": "e",
                "results": {"E": 1},
            },
            "func_details[0].header_line",
            2,
        ),
        (
            {
                "paper_id": "p",
                "func_ids": "0",
                "func_details": [{"name": "f", "file": "a.py", "header_line": "9", "line_end": 3}],
                "experiments": "e",
                "results": {"E": 1},
            },
            "func_details[0].line_end",
            2,
        ),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path: Path, rows_file: Path, row, field, line):
    good = rows_file.read_text().splitlines()[1]
    path = tmp_path / "rows.jsonl"
    path.write_text(good + "\n" + json.dumps(row) + "\n")
    with pytest.raises(InputError) as err:
        TASK_IMPORTERS.load(path, "autoexperiment")
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)


def test_a_broken_line_and_a_duplicate_row_are_errors(tmp_path: Path, rows_file: Path):
    lines = rows_file.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + "\n\n{oops\n")
    with pytest.raises(InputError, match="invalid JSON") as err:
        TASK_IMPORTERS.load(broken, "autoexperiment")
    assert err.value.line == 3
    twice = tmp_path / "twice.jsonl"
    twice.write_text(lines[0] + "\n" + lines[0] + "\n")
    with pytest.raises(InputError, match="duplicate task 2205.00048_0,1 \\(first on line 1\\)"):
        TASK_IMPORTERS.load(twice, "autoexperiment")


def test_a_description_with_a_lone_surrogate_is_refused_naming_the_field(tmp_path):
    import json as _json

    from failatlas.bench_core.tasks.importers.autoexperiment import load_autoexperiment
    from failatlas.core.errors import InputError as _InputError

    (tmp_path / "p" / "code").mkdir(parents=True)
    (tmp_path / "p" / "code" / "m.py").write_text("def f():\n    return 1\n")
    row = {"paper_id": "p", "func_ids": "0", "experiments": "Experiment 1: run", "solution": "python3 m.py",
           "results": {"Experiment 1": 1.0}, "func_details": [
               {"file": "m.py", "name": "f", "header_line": 1, "line_start": 2, "line_end": 2,
                "description": "bad \ud800 text"}]}
    (tmp_path / "rows.jsonl").write_text(_json.dumps(row) + "\n")
    with pytest.raises(_InputError) as err:
        load_autoexperiment(tmp_path / "rows.jsonl")
    assert err.value.line == 1 and err.value.field == "func_details[0].description"

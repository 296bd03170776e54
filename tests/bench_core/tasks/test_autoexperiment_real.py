"""AutoExperiment's real rows (../shared/data/autoexperiment/MLRC, read in place): all 219 import, every row of
the two bundled papers prepares as the benchmark gives it, and the rows of the two absent papers say so."""

from __future__ import annotations

import ast
import inspect
import json
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.prepare.leaks import normalise
from failatlas.bench_core.prepare.stubs import (
    StubTarget,
    find_functions,
    locate,
    parse_python,
    stubbed_correctly,
    target_bodies,
)
from failatlas.bench_core.tasks import TASK_IMPORTERS, TaskImportParams, TaskKind, TaskSpec, get_task, list_tasks, run
from failatlas.cli import app
from failatlas.core.errors import InputError

BUNDLED = ("2205.00048", "2303.11932")
ABSENT = ("2309.05569", "2110.03485")
FILES = ("mlrc_n=0.jsonl", "mlrc_n=1.jsonl", "mlrc_n=2.jsonl")


@pytest.fixture(scope="module")
def mlrc(shared_data: Path) -> Path:
    return shared_data / "autoexperiment" / "MLRC"


@pytest.fixture(scope="module")
def rows_and_tasks(mlrc: Path) -> list[tuple[dict, TaskSpec]]:
    """(raw row, imported task) for every row of the three files, in file order."""
    pairs = []
    for name in FILES:
        rows = [json.loads(line) for line in (mlrc / name).read_text().splitlines() if line.strip()]
        tasks = TASK_IMPORTERS.load(mlrc / name, "autoexperiment").records
        assert len(rows) == len(tasks)
        pairs.extend(zip(rows, tasks, strict=True))
    return pairs


def test_all_219_rows_import_into_a_store(store, mlrc: Path) -> None:
    result = run(store, TaskImportParams(paths=[mlrc]))
    assert (result.n_tasks, result.inserted) == (219, 219)
    catalog = list_tasks(store, benchmark="autoexperiment")
    assert len(catalog) == 219
    assert Counter(r["kind"] for r in catalog) == {"masked_functions": 215, "full_code": 4}
    assert sorted(r["id"] for r in catalog if r["kind"] == "full_code") == [
        f"autoexperiment-{p}" for p in sorted(BUNDLED + ABSENT)]
    assert not any(r["id"].endswith("_") for r in catalog)
    task = get_task(store, "autoexperiment-2303.11932_0,1")  # read back from the store
    first = task.masking.functions[0]
    assert (first.path, first.qualname, first.line_start, first.line_end) == ("losses.py", "__call__", 68, 88)
    assert first.docstring.startswith("Compute the Energy loss based on model attributions")
    assert task.materials == {"paper.txt": "2303.11932/paper.txt"} and task.run.answer == "stdout_json"


def test_rows_keep_lines_descriptions_refsol_and_the_paper(rows_and_tasks) -> None:
    for row, task in rows_and_tasks:
        masked = bool(row["func_details"])
        assert task.kind == (TaskKind.MASKED_FUNCTIONS if masked else TaskKind.FULL_CODE)
        assert [(f.path, f.qualname, f.line_start, f.line_end, f.docstring) for f in task.masking.functions] == [
            (d["file"], d["name"], d["header_line"], d["line_end"], d["description"].strip())
            for d in row["func_details"]]
        assert task.run.command == row["solution"] and task.run.answer == "stdout_json"
        bundled = row["paper_id"] in BUNDLED
        assert task.materials == ({"paper.txt": f"{row['paper_id']}/paper.txt"} if bundled else {})
        assert [w.split(":")[0] for w in task.warnings] == ([] if bundled else ["repository-unavailable"])


def test_settings_show_the_run_command_only_with_refsol(rows_and_tasks) -> None:
    for row, task in rows_and_tasks:
        names = ["partial_code", "partial_code+refsol"] if row["func_details"] else ["full_code", "full_code+refsol"]
        assert [s.name for s in task.settings] == names and all(s.description for s in task.settings)
        hidden, shown = task.agent_view(), task.agent_view(names[1])
        assert (hidden.setting, hidden.run_command) == (names[0], None)
        assert (shown.setting, shown.run_command) == (names[1], row["solution"])
        command_lines = [line for line in row["solution"].splitlines() if not line.startswith("echo ")]
        assert not any(line.strip() in task.instructions for line in command_lines if line.strip())
        assert ("docstring" in task.instructions) == bool(row["func_details"])
        assert ("paper.txt" in task.instructions) == (row["paper_id"] in BUNDLED)


def _git_objects_text(root: Path) -> str:
    """Every git object of the prepared tree (its only commit holds every file), normalised as the leak scan
    does."""
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=root, check=True,
                            capture_output=True).stdout
    assert status == b"", status
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=root, check=True,
                             capture_output=True).stdout
    return normalise(objects.decode(errors="replace"))


class _Reference:
    """The reference code of the bundled papers, each masked function located and its body read once."""

    def __init__(self) -> None:
        self._found: dict[tuple[Path, str, int | None], tuple[str, str]] = {}

    def masked(self, task: TaskSpec) -> list[tuple[str, str, str]]:
        """(path, real qualname, original body) of each masked function of `task`."""
        repo = Path(task.source).parent / task.repository.local_path
        out = []
        for ref in task.masking.functions:
            key = (repo, ref.path, ref.line_start)
            if key not in self._found:
                source = (repo / ref.path).read_text()
                target = StubTarget(ref.qualname, ref.line_start, ref.line_end)
                (qualname, _), = locate(ast.parse(source), target, ref.path)[0]
                self._found[key] = qualname, target_bodies(source, [target], filename=ref.path)[qualname]
            out.append((ref.path, *self._found[key]))
        return out


def _prepare_and_check(task: TaskSpec, reference: _Reference, dest: Path) -> list[str]:
    """Prepare `task` into `dest`, check that it is what AutoExperiment gives, remove it; return its notes on
    functions found away from their given lines."""
    prepared = prepare_workspace(task, dest)
    root = Path(prepared.path)
    paper = Path(task.source).parent / task.materials["paper.txt"]
    assert prepared.materials == ["paper.txt"] and (root / "paper.txt").read_bytes() == paper.read_bytes()
    masked = reference.masked(task)
    assert prepared.masked_functions == [f"{path}::{qualname}" for path, qualname, _ in masked], task.id
    text = _git_objects_text(root)
    for ref, (path, qualname, body) in zip(task.masking.functions, masked, strict=True):
        stubbed = (root / path).read_text()
        (node,) = find_functions(parse_python(stubbed), qualname)  # locked: ast.parse in threads races (cpython#106905)
        assert ast.get_docstring(node) == inspect.cleandoc(ref.docstring), (task.id, qualname)
        assert stubbed_correctly(stubbed, qualname), (task.id, qualname)
        assert normalise(body) not in text, (task.id, qualname)
    shutil.rmtree(root)
    return [w for w in prepared.warnings if "as given" in w]


@pytest.mark.slow
def test_every_row_of_the_bundled_papers_prepares_as_autoexperiment_gives_it(rows_and_tasks, tmp_path: Path) -> None:
    reference = _Reference()
    bundled = [task for row, task in rows_and_tasks if row["paper_id"] in BUNDLED]
    assert len(bundled) == 157
    for task in bundled:  # located once, so the threads below only read the cache
        reference.masked(task)
    with ThreadPoolExecutor(max_workers=4) as pool:  # mostly git and file work: threads overlap it
        notes = pool.map(lambda item: _prepare_and_check(item[1], reference, tmp_path / str(item[0])),
                         enumerate(bundled))
        found = {note for task_notes in notes for note in task_notes}
    # The rows' lines are right everywhere but for four methods of 2303.11932's losses.py: there they start at
    # the class line (or one line late), and each is found by its name within those lines.
    assert sorted(n.split(" in losses.py")[0] for n in found) == [
        "EnergyPointingGameBBMultipleLoss.__call__", "GradiaBBMultipleLoss.__call__",
        "HAICSBBMultipleLoss.__call__", "RRRBBMultipleLoss.__call__"]


def test_the_rows_of_the_absent_papers_say_repository_not_available(rows_and_tasks, tmp_path: Path) -> None:
    absent = [task for row, task in rows_and_tasks if row["paper_id"] in ABSENT]
    assert len(absent) == 62
    for task in absent:
        with pytest.raises(InputError) as info:
            prepare_workspace(task, tmp_path / "ws")
        assert f"task {task.id}: repository not available: its bundled copy" in str(info.value)
        assert "--repo PATH" in info.value.one_line()
    assert not (tmp_path / "ws").exists()


def test_a_real_row_renamed_to_another_function_is_refused(rows_and_tasks, tmp_path: Path) -> None:
    row, task = next((r, t) for r, t in rows_and_tasks if t.id == "autoexperiment-2205.00048_0")
    assert task.masking.functions[0].qualname == "II_F"
    task.masking.functions[0].qualname = "GI_F"  # the lines still point at II_F
    with pytest.raises(InputError, match="line 4 defines 'II_F', not 'GI_F'"):
        prepare_workspace(task, tmp_path / "ws")


def _crafted_rows(tmp_path: Path, name: str, description: str) -> Path:
    """A rows file in tmp_path in AutoExperiment's format, with its paper's code and paper beside it."""
    code = tmp_path / "9999.00001" / "code"
    code.mkdir(parents=True)
    (code / "nets.py").write_text(
        "class Encoder:\n"
        "    def forward(self, x):\n"
        "        return x * 2 + 4242424242\n"
        "\n"
        "\n"
        "class Decoder:\n"
        "    def forward(self, x):\n"
        "        return x - 8383838383\n")
    (code / "run.py").write_text("print('{\"Experiment 1\": 1.0}')\n")
    (tmp_path / "9999.00001" / "paper.txt").write_text("We decode.\n")
    row = {"paper_id": "9999.00001", "func_ids": "0",
           "func_details": [{"func_id": "0", "file": "nets.py", "name": name, "header_line": 7, "line_start": 8,
                             "line_end": 8, "description": description}],
           "experiments": "Experiment 1: run it.\nReturn final answer as a json: {\"Experiment 1\": ...}",
           "solution": "echo Experiment 1\npython run.py\n", "results": "{\"Experiment 1\": 1.0}"}
    rows = tmp_path / "mlrc_n=1.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    return rows


def test_a_crafted_row_whose_lines_hold_another_function_fails_clearly(tmp_path: Path) -> None:
    (task,) = TASK_IMPORTERS.load(_crafted_rows(tmp_path, "backward", "Undo forward."), "autoexperiment").records
    with pytest.raises(InputError) as info:
        prepare_workspace(task, tmp_path / "ws")
    assert str(info.value) == ("nets.py field 'masking.functions': task autoexperiment-9999.00001_0: nets.py line 7 "
                               "defines 'Decoder.forward', not 'backward': the lines given point at another function")


def test_a_description_with_quotes_backslashes_and_unicode_still_compiles(tmp_path: Path) -> None:
    description = 'Subtract the """shift""" \\ from x — naïve “Δ” ✓.\n\n:param x: a path like C:\\new\\table\n"'
    (task,) = TASK_IMPORTERS.load(_crafted_rows(tmp_path, "forward", description), "autoexperiment").records
    prepared = prepare_workspace(task, tmp_path / "ws")
    assert prepared.masked_functions == ["nets.py::Decoder.forward"]
    stubbed = (Path(prepared.path) / "nets.py").read_text(encoding="utf-8")
    compile(stubbed, "nets.py", "exec", dont_inherit=True)
    (node,) = find_functions(ast.parse(stubbed), "Decoder.forward")
    assert ast.get_docstring(node) == inspect.cleandoc(description)
    assert "8383838383" not in _git_objects_text(Path(prepared.path)) and "4242424242" in stubbed


def test_import_then_prepare_from_the_command_line(mlrc: Path, tmp_path: Path) -> None:
    runner = CliRunner(env={"FAILATLAS_NO_PROGRESS": "1"})

    def tasks(*args: str):
        return runner.invoke(app, ["--db", str(tmp_path / "ae.duckdb"), "tasks", *args])

    imported = tasks("import", str(mlrc))
    assert imported.exit_code == 0, imported.output
    assert "219 task(s) (219 new" in imported.output and "full_code 4, masked_functions 215" in imported.output
    prepared = tasks("prepare", "autoexperiment-2303.11932_0,9", "--out", str(tmp_path / "ws"))
    assert prepared.exit_code == 0, prepared.output
    assert "masked function: losses.py::EnergyPointingGameBBMultipleLoss.__call__" in prepared.output
    assert "masked function: attribution_methods.py::BCosAttributor._call_batch_mode" in prepared.output
    assert (tmp_path / "ws" / "paper.txt").is_file()
    refused = tasks("prepare", "autoexperiment-2110.03485_0", "--out", str(tmp_path / "other"))
    assert refused.exit_code == 2
    assert "repository not available" in refused.output and "--repo PATH" in refused.output

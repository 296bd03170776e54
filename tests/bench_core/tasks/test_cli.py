"""`failatlas tasks` through the root CLI: import, list with filters, show, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.store import open_store

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli") / "store.duckdb"


@pytest.fixture(scope="module")
def run(cli_db: Path):
    runner = CliRunner(env={"FAILATLAS_NO_PROGRESS": "1"})

    def invoke(*args: str):
        return runner.invoke(app, ["--db", str(cli_db), "tasks", *args])

    return invoke


@pytest.fixture(scope="module")
def imported(run, iclr2024: Path):
    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    result = run("import", str(iclr2024), str(fixtures / "autoexperiment"), str(fixtures / "rexbench"))
    assert result.exit_code == 0, result.output
    return result


def test_import_prints_a_summary_line(imported):
    text = " ".join(imported.stdout.split())  # the summary wraps at the terminal's width (80 columns here)
    assert all(len(line) <= 80 for line in imported.stdout.splitlines())
    assert (
        "imported 28 file(s), 211 task(s) (211 new, 0 updated, 0 unchanged); by kind: T1 97, T2 55, T3 54, "
        "extension 2, masked_functions 3; "
    ) in text
    assert "missing-design 5" in text
    assert "index 206" in text and "gpus-guessed 11" in text  # the index found beside


def test_reimport_with_explicit_format_updates_nothing(run, imported, iclr2024: Path):
    result = run("import", "--format", "expbench", str(iclr2024 / "18277.json"), "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["summary"].startswith("1 file(s), 7 task(s) (0 new, 0 updated, 7 unchanged)")


def test_import_can_print_every_warning(run, imported, iclr2024: Path):
    result = run("import", str(iclr2024 / "18277.json"), "--warnings")
    assert result.exit_code == 0
    lines = [line for line in result.stdout.splitlines() if line.startswith("expbench-18277-")]
    assert len(lines) == 7 + 7
    assert sum("missing-design: no design_complexity" in line for line in lines) == 5
    # the importer names files by their resolved path: the data folder may be behind a symbolic link
    index = iclr2024.resolve().parent / "iclr2024_index.jsonl"
    assert sum(f"index: repository and GPU needs from {index}" in line for line in lines) == 7


def test_list_with_filters(run, imported):
    rows = json.loads(run("list", "--kind", "T3", "--paper", "18277", "--json").stdout)
    assert [(r["kind"], r["paper_id"]) for r in rows] == [("T3", "18277")]
    rows = json.loads(run("list", "--benchmark", "autoexperiment", "--json").stdout)
    assert sorted(r["id"] for r in rows) == [
        "autoexperiment-2205.00048_0,1",
        "autoexperiment-2205.00048_1",
        "autoexperiment-2205.00048_2",
    ]
    table = run("list", "--benchmark", "rexbench")
    assert table.exit_code == 0
    assert "2 task(s)" in table.stdout and "rexbench-othello" in table.stdout and "2 warning(s)" in table.stdout


def test_show_hides_ground_truth_unless_asked(run, imported):
    rows = json.loads(run("list", "--paper", "18439", "--json").stdout)
    task_id = rows[0]["id"]
    public = json.loads(run("show", task_id, "--json").stdout)
    assert public["id"] == task_id and "expected_conclusion" not in public and "design" not in public
    full = json.loads(run("show", task_id, "--json", "--ground-truth").stdout)
    assert full["expected_conclusion"] and full["design"]["independent"]
    text = run("show", "rexbench-othello")
    assert text.exit_code == 0
    assert "hint level 2" in text.stdout and "ground truth hidden" in text.stdout
    assert "repository-from-user" in text.stdout and "instructions_md" not in text.stdout
    text = run("show", "rexbench-othello", "--ground-truth")
    assert "extra fields" in text.stdout and "instructions_md" in text.stdout


def test_errors_are_one_line_with_an_exit_code(run, imported, tmp_path: Path):
    missing = run("import", str(tmp_path / "nope.json"))
    assert missing.exit_code == 2
    assert missing.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope.json'}: no such file or folder"]
    unknown = run("show", "no-such-task")
    assert unknown.exit_code == 3
    lines = unknown.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no task 'no-such-task' in the catalog")
    assert "Traceback" not in unknown.output
    bad_kind = run("list", "--kind", "T9")
    assert bad_kind.exit_code == 2 and "unknown task kind 'T9'" in bad_kind.stderr


def test_main_turns_errors_into_one_line_without_traceback(db_path: Path):
    open_store(db_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "FAILATLAS_NO_PROGRESS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "failatlas", "--db", str(db_path), "tasks", "show", "nope"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: no task 'nope' in the catalog (the catalog is empty: import tasks with "
        "`failatlas tasks import PATH` or `failatlas tasks import-mini`)"
    ]


def test_the_import_line_names_the_skipped_files(shared_data: Path, tmp_path: Path):
    """Up to 5 skipped files by name, then how many more; without --json."""
    folder = tmp_path / "logs" / "18439"
    folder.mkdir(parents=True)
    (folder / "18439_complete_final.json").write_text(
        (shared_data / "expbench" / "iclr2024" / "18439.json").read_text())
    names = [f"config_{i}.json" for i in range(7)]
    for name in names:
        (folder / name).write_text('{"model": "o3-mini"}')
    runner = CliRunner(env={"FAILATLAS_NO_PROGRESS": "1", "COLUMNS": "400"})
    res = runner.invoke(app, ["--db", str(tmp_path / "s.duckdb"), "tasks", "import", str(tmp_path / "logs")])
    assert res.exit_code == 0, res.output
    line = " ".join(res.output.split())
    shown = [name for name in names if name in line]
    assert "7 file(s) skipped: " in line and len(shown) == 5 and "and 2 more (--json lists them all)" in line

"""What a new user met (the first-use report): bad flags and paths end in one line naming the option or the path,
never a traceback; `bench list --json` and `bench show` say how each run was judged; help texts say what the
app writes. Every command runs as a user runs it: `python -m failatlas` on a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import ExpectedMetric, RepoRef, RunSpec, TaskSpec


def _cli(*args: str, cwd: Path, width: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(width), "FAILATLAS_NO_PROGRESS": "1"}
    env.pop("FAILATLAS_DB", None)
    return subprocess.run([sys.executable, "-m", "failatlas", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def _one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    """The error a user sees: a non-zero exit, one line on stderr starting with 'error:', naming `words`."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def mini_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mini")
    result = _cli("--db", "mini.duckdb", "tasks", "import-mini", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder / "mini.duckdb"


def test_tasks_prepare_names_the_force_flag_and_says_when_out_is_a_file(mini_db, tmp_path):
    full = tmp_path / "full"
    (full / "x").mkdir(parents=True)
    line = _one_line_error(_cli("--db", str(mini_db), "tasks", "prepare", "mini-ridge-cv", "--out", str(full),
                                cwd=tmp_path), str(full), "not empty", "--force")
    assert "force=True to" not in line  # the flag a CLI user can pass, not the Python argument alone
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    line = _one_line_error(_cli("--db", str(mini_db), "tasks", "prepare", "mini-ridge-cv", "--out", str(a_file),
                                cwd=tmp_path), str(a_file), "is a file, not a folder")
    assert "not empty" not in line and a_file.read_text() == "mine\n"
    # --force replaces the folder, as the message says
    result = _cli("--db", str(mini_db), "tasks", "prepare", "mini-ridge-cv", "--out", str(full), "--force",
                  cwd=tmp_path)
    assert result.returncode == 0 and not (full / "x").exists(), result.stderr


def test_app_help_says_what_the_app_writes(tmp_path):
    for args in (["--help"], ["app", "--help"]):
        text = " ".join(_cli(*args, cwd=tmp_path, width=200).stdout.replace("│", " ").split())
        assert "read-only" not in text, text
        assert "writes only what you do in it (labels, taxonomy edits)" in text, text

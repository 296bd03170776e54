"""The CLI a researcher reads (issue 20): `bench run` says how each run ended as it finishes and estimates the time
left; no help text loses a computed default to Rich markup (a dangling " .")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from failatlas.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _commands(group, prefix: tuple[str, ...] = ()):  # noqa: ANN202
    ctx = type(group).context_class(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        path = (*prefix, name)
        yield path
        if hasattr(command, "list_commands"):  # a group (Typer vendors its own click)
            yield from _commands(command, path)


def test_no_help_text_has_a_dangling_period() -> None:
    """"[default: X]" inside a help string is Rich markup to Typer: it vanished and left "Workspaces folder ."."""
    runner = CliRunner()
    paths = list(_commands(typer.main.get_command(app)))
    assert len(paths) > 20
    bad = {}
    for path in paths:
        out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400", "TERM": "dumb"}).output
        lines = [line for line in out.splitlines() if re.search(r"\s\.(?=\s|$)", line)]
        if lines:
            bad[" ".join(path)] = lines
    assert not bad, bad


@pytest.fixture
def mini_db(tmp_path: Path) -> Path:
    db = tmp_path / "cli.duckdb"
    result = CliRunner().invoke(app, ["--db", str(db), "tasks", "import-mini"])
    assert result.exit_code == 0, result.output
    return db


@pytest.mark.slow  # two real runs of the reference agent in local sandboxes
def test_bench_run_says_how_each_run_ended_as_it_finishes(mini_db: Path, tmp_path: Path) -> None:
    env = dict(os.environ, FAILATLAS_NO_PROGRESS="1", COLUMNS="200")
    cmd = [sys.executable, "-m", "failatlas", "--db", str(mini_db), "bench", "run", "--agent", "fault-crash",
           "--sandbox", "local", "--task", "mini-ridge-cv", "--task", "mini-kmeans-init"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if " attempt 1 (" in line]
    assert sorted(line.split()[1] for line in lines) == ["mini-kmeans-init", "mini-ridge-cv"]
    assert all(re.match(r"(done|FAIL|INFRA) \S+ attempt 1 \((completed|agent_error|infra_error), \d+ s\)", line)
               for line in lines), lines
    assert proc.stdout.index(lines[-1]) < proc.stdout.index("run(s) executed")  # as they finish, before the summary
    # With a bar: the estimate of the time left is part of it.
    env.pop("FAILATLAS_NO_PROGRESS")
    again = subprocess.run([*cmd[:-4], "--task", "mini-logreg-scaling"], capture_output=True, text=True, cwd=ROOT,
                           env=env, timeout=600)
    assert again.returncode == 0 and "fault-crash runs" in again.stderr and " left " in again.stderr, again.stderr

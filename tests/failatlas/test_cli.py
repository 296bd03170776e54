from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from failatlas.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _walk(command, path: tuple[str, ...] = ()):
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _walk(sub, (*path, name))


def test_every_command_has_help_and_every_group_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    root = typer.main.get_command(app)
    seen = 0
    for path, command in _walk(root):
        assert (command.help or "").strip(), f"`failatlas {' '.join(path)}` has no help text"
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, result.output
        if len(path) == 1 and getattr(command, "commands", None):
            assert f"failatlas {path[0]}" in readme, f"README does not mention `failatlas {path[0]}`"
        seen += 1
    assert seen >= 5


def test_db_migrate_then_info(tmp_path):
    db = tmp_path / "x.duckdb"
    result = runner.invoke(app, ["--db", str(db), "db", "migrate"])
    assert result.exit_code == 0, result.output
    assert "applied" in result.output
    result = runner.invoke(app, ["--db", str(db), "db", "info"])
    assert result.exit_code == 0, result.output
    assert "schema_migrations" in result.output


def test_user_mistake_is_one_line_and_non_zero_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "failatlas", "--db", str(tmp_path / "none.duckdb"), "db", "info"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert proc.returncode == 5
    assert "Traceback" not in proc.stderr
    assert "no store at" in proc.stderr and "none.duckdb" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


def test_an_error_quoting_user_input_shows_markup_as_text(tmp_path):
    import subprocess

    proc = subprocess.run(["failatlas", "--db", str(tmp_path / "s.duckdb"), "bench", "run", "--agent", "gold",
                           "--task", "[red]zz[/]"], capture_output=True, text=True)
    assert proc.returncode != 0 and "'[red]zz[/]'" in proc.stderr


def test_a_mistyped_agent_is_named_with_a_suggestion_before_any_progress_bar(tmp_path):
    import subprocess

    db = str(tmp_path / "s.duckdb")
    subprocess.run(["failatlas", "--db", db, "tasks", "import-mini"], check=True, capture_output=True)
    proc = subprocess.run(["failatlas", "--db", db, "bench", "run", "--agent", "golden"], capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "did you mean 'gold'?" in proc.stderr
    assert "golden runs" not in proc.stdout + proc.stderr  # no progress bar drawn for a run that cannot start
    assert "hostile-" not in proc.stderr and "hidden)" in proc.stderr  # the harness-attacking agents stay hidden


def test_bench_list_shows_whole_run_ids_in_a_narrow_terminal_and_as_json(tmp_path):
    import json
    import os
    import subprocess

    db = str(tmp_path / "s.duckdb")
    env = {**os.environ, "COLUMNS": "80"}
    subprocess.run(["failatlas", "--db", db, "tasks", "import-mini"], check=True, capture_output=True)
    subprocess.run(["failatlas", "--db", db, "bench", "run", "--agent", "null", "--task", "mini-ridge-cv",
                    "--sandbox", "local", "--runs-dir", str(tmp_path / "runs")], check=True, capture_output=True)
    rows = json.loads(subprocess.run(["failatlas", "--db", db, "bench", "list", "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    assert [r["task_id"] for r in rows] == ["mini-ridge-cv"] and rows[0]["id"].startswith("run-")
    table = subprocess.run(["failatlas", "--db", db, "bench", "list"], check=True, capture_output=True, text=True,
                           env=env).stdout
    assert rows[0]["id"] in table


def test_a_mistyped_phase_is_named_with_the_valid_ones(tmp_path):
    import subprocess

    proc = subprocess.run(["failatlas", "--db", str(tmp_path / "s.duckdb"), "cluster", "run", "--phase",
                           "implmentation"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "did you mean 'implementation'?" in proc.stderr and "design, implementation, execution" in proc.stderr


def test_hostile_agents_are_listed_only_when_asked():
    import subprocess

    from failatlas.bench_core.agents import AGENTS, agent_names

    hostile = [n for n in AGENTS.names() if n.startswith("hostile-")]
    assert hostile and not set(hostile) & set(agent_names())
    assert set(hostile) <= set(agent_names(include_hidden=True))
    shown = subprocess.run(["failatlas", "agents"], capture_output=True, text=True, check=True).stdout
    everything = subprocess.run(["failatlas", "agents", "--all"], capture_output=True, text=True, check=True).stdout
    assert "gold" in shown and "hostile-" not in shown and "hostile-fork-bomb" in everything
    help_text = subprocess.run(["failatlas", "bench", "run", "--help"], capture_output=True, text=True).stdout
    assert "hostile" not in help_text and "gold" in help_text

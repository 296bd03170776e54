"""`bench run --agent A --agent B` (issue 54): each agent named runs, in the order given; before, click kept the last
`--agent` and the others were dropped without a word. An unknown one among them stops the command before any run."""

from __future__ import annotations

from pathlib import Path

import duckdb
from typer.testing import CliRunner

from failatlas.cli import app


def _invoke(db: Path, *args: str):  # noqa: ANN202
    return CliRunner().invoke(app, ["--db", str(db), *args], env={"FAILATLAS_NO_PROGRESS": "1", "COLUMNS": "200"})


def _agents(db: Path) -> list[tuple[str, str]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute("SELECT agent, task_id FROM runs ORDER BY started_at, agent").fetchall()


def test_each_agent_named_runs_in_the_order_given(tmp_path):
    db = tmp_path / "s.duckdb"
    assert _invoke(db, "tasks", "import-mini").exit_code == 0
    result = _invoke(db, "bench", "run", "--agent", "null", "--agent", "gold", "--agent", "null",
                     "--task", "mini-ridge-cv", "--sandbox", "local")
    assert result.exit_code == 0, result.output
    assert _agents(db) == [("null", "mini-ridge-cv"), ("gold", "mini-ridge-cv")]  # null named twice: run once
    summaries = [line for line in result.output.splitlines() if "run(s) executed" in line]
    assert [line.split(":")[0] for line in summaries] == ["null", "gold"], result.output


def test_an_unknown_agent_among_several_stops_before_any_run(tmp_path):
    db = tmp_path / "s.duckdb"
    assert _invoke(db, "tasks", "import-mini").exit_code == 0
    result = _invoke(db, "bench", "run", "--agent", "gold", "--agent", "no-such-agent", "--task", "mini-ridge-cv",
                     "--sandbox", "local")
    assert result.exit_code != 0
    assert "unknown agent 'no-such-agent'" in str(result.exception)  # main() prints it as the error line
    assert _agents(db) == []  # gold, named first, did not run either

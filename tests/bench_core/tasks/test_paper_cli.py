"""Issue 52, R7: a paper is one option, not 36; `tasks list --paper P --masked 1` is a few lines per task, not
58; a validation's progress knows its total."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.repos import repository_for
from failatlas.bench_core.tasks.catalog import get_task, list_tasks
from failatlas.cli import app
from failatlas.core.store import Store
from tests.conftest import SHARED_DATA

MLRC = SHARED_DATA / "autoexperiment" / "MLRC"


@pytest.fixture
def db(tmp_path):
    if not MLRC.is_dir():
        pytest.fail(f"the real data is missing: {MLRC}")
    path = tmp_path / "s.duckdb"
    result = CliRunner().invoke(app, ["--db", str(path), "tasks", "import", str(MLRC / "mlrc_n=1.jsonl"),
                                      str(MLRC / "mlrc_n=2.jsonl")])
    assert result.exit_code == 0, result.output
    return path


def test_tasks_list_of_a_paper_is_a_few_lines_per_task(db):
    result = CliRunner().invoke(app, ["--db", str(db), "tasks", "list", "--paper", "2205.00048", "--masked", "1"],
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) <= 1 + 7 * 6, len(lines)  # was 58 lines per task
    assert "masks II_F:" in result.output and "masks eval_function_stochas:" in result.output


def test_repos_add_paper_binds_every_task_of_the_paper(db, tmp_path):
    repo = tmp_path / "code"
    repo.mkdir()
    (repo / "x.py").write_text("x = 1\n")
    result = CliRunner().invoke(app, ["--db", str(db), "repos", "add", str(repo), "--paper", "2205.00048"])
    assert result.exit_code == 0, result.output
    store = Store(db)
    mine = list_tasks(store, paper="2205.00048")
    assert len(mine) == 35
    assert all(repository_for(store, get_task(store, r["id"])).source == str(repo) for r in mine)
    other = get_task(store, list_tasks(store, paper="2303.11932")[0]["id"])
    assert repository_for(store, other) is None
    wrong = CliRunner().invoke(app, ["--db", str(db), "repos", "add", str(repo), "--paper", "2205.0004"])
    assert wrong.exit_code != 0 and "did you mean 2205.00048" in wrong.output + str(wrong.exception)


def test_validate_tells_its_total_before_the_first_step(db, tmp_path):
    """The stage says how many steps there are as soon as it knows (the bar read "2/?")."""
    from failatlas.bench_core.task_validation import ValidateParams, run

    totals: list[int] = []
    steps: list[str] = []
    run(Store(db), ValidateParams(papers=["2309.05569"], sandbox="local", runs_dir=tmp_path / "runs", mutants=0,
                                  method_mutants=0),
        on_step=steps.append, on_total=totals.append)
    assert totals and totals[0] == 2 * 45 and len(steps) <= totals[-1]
    assert totals[-1] == 45  # no repository: every task decided without a run


def test_a_papers_tasks_leave_out_the_variants_a_validation_made(db):
    """Stored `+ref-` variants are a validation's artefacts: `--paper` selects the benchmark's tasks (a second
    `tasks validate --paper` made variants of variants), `--task` still names a variant."""
    from failatlas.bench_core.runs.data import VALUED_ON_KEY
    from failatlas.bench_core.tasks import save_tasks
    from failatlas.bench_core.tasks.catalog import VARIANT_KEY

    assert VARIANT_KEY == VALUED_ON_KEY
    store = Store(db)
    task = get_task(store, "autoexperiment-2205.00048_0")
    variant = task.model_copy(update={"id": task.id + "+ref-00000000", "extra": {VARIANT_KEY: {"of": task.id}}})
    save_tasks(store, [variant], source="test")
    ids = {r["id"] for r in list_tasks(store, paper="2205.00048")}
    assert task.id in ids and variant.id not in ids
    assert variant.id in {r["id"] for r in list_tasks(store, paper="2205.00048", variants=True)}

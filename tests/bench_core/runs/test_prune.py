"""Run folders (issue 40, N9): a run keeps one copy of its repository (the agent's copied-out tree), and
`failatlas bench prune` frees the folders of scored runs without changing what `bench report` and the app show."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from failatlas.bench_core.runs import BenchParams, run
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "mini-ridge-cv"


def _repository_copies(folder: Path) -> list[str]:
    """The folders under `folder` holding a copy of the task's repository (its run script), relative to it."""
    return sorted(str(Path(here).relative_to(folder)) for here, _dirs, files in os.walk(folder) if "run.py" in files)


def _plain(value):
    """`value` with every data frame in it made rows, so that two readings compare with ==."""
    if isinstance(value, pl.DataFrame):
        return value.to_dicts()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def test_a_run_keeps_one_copy_and_prune_frees_scored_runs_only(store, tmp_path, monkeypatch):
    from failatlas.appdata.queries_run_view import run_detail
    from failatlas.appdata.queries_runs import run_table
    from failatlas.cli import app

    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    runs_dir = tmp_path / "runs"
    gold = run(store, BenchParams(agent="gold", task_ids=[TASK], sandbox="local", runs_dir=runs_dir))
    null = run(store, BenchParams(agent="null", task_ids=[TASK], sandbox="local", runs_dir=runs_dir))
    [gold_id], [null_id] = gold.run_ids, null.run_ids
    # one copy of the repository per run: the agent's tree as it was copied out, nothing else
    # (the masked repository's .git is the harness's and is not copied out: issue 52, R5)
    for run_id in (gold_id, null_id):
        assert _repository_copies(runs_dir / run_id) == ["final"], os.listdir(runs_dir / run_id)
        assert not (runs_dir / run_id / "final" / ".git").exists()
    score(store, ScoreParams(run_ids=[gold_id], runs_dir=runs_dir))

    monkeypatch.setenv("FAILATLAS_DB", str(store.path))
    monkeypatch.setenv("COLUMNS", "200")
    cli = CliRunner()

    def shown() -> tuple:
        report = cli.invoke(app, ["bench", "report", "--by", "agent,task"])
        shows = [cli.invoke(app, ["bench", "show", run_id]).output for run_id in (gold_id, null_id)]
        assert report.exit_code == 0, report.output
        return _plain((report.output, shows, run_detail(store, gold_id), run_detail(store, null_id),
                       run_table(store)))

    before = shown()
    dry = cli.invoke(app, ["bench", "prune", "--runs-dir", str(runs_dir), "--dry-run"])
    assert dry.exit_code == 0 and "1 scored run folder(s): would free" in dry.output, dry.output
    assert (runs_dir / gold_id).is_dir()
    result = cli.invoke(app, ["bench", "prune", "--runs-dir", str(runs_dir)])
    assert result.exit_code == 0, result.output
    assert "1 scored run folder(s): freed" in result.output and "1 folder(s) of runs not scored yet" in result.output
    assert not (runs_dir / gold_id).exists()  # scored: freed
    assert (runs_dir / null_id / "final").is_dir()  # not scored yet: kept
    assert shown() == before  # the report, `bench show` and the app's run data are the same
    # scoring again after the prune still works: it builds its trees from the repository and the stored diff
    again = score(store, ScoreParams(run_ids=[gold_id], runs_dir=runs_dir, rescore=True))
    assert again.scored == 1 and again.ok, again
    assert store.query("SELECT status FROM stage_runs WHERE stage = 'bench.prune'") == [("ok",), ("ok",)]

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.store import open_store
from tests.cluster.trail import load_trail


@pytest.mark.slow  # UMAP's first numba compile plus embedding 120 texts on a shared CPU
def test_embed_cluster_evaluate_through_the_cli_on_trail(db_path, shared_data, monkeypatch):
    monkeypatch.setenv("FAILATLAS_NO_PROGRESS", "1")
    store = open_store(db_path)
    load_trail(store, shared_data / "trail" / "trail_errors_gaia.jsonl", limit=120)
    runner = CliRunner()
    db = ["--db", str(db_path)]

    first = runner.invoke(app, [*db, "embed", "run", "--batch-size", "32"])
    assert first.exit_code == 0, first.output
    assert "embedded" in first.output and " 0 cached" in first.output
    again = runner.invoke(app, [*db, "embed", "run"])
    assert again.exit_code == 0 and " 0 embedded" in again.output

    run = runner.invoke(
        app, [*db, "cluster", "run", "--phase", "other", "--seed", "3", "--reassign-outliers"]
    )
    assert run.exit_code == 0, run.output
    ((clustering_id, params),) = store.query("SELECT id, params FROM clusterings")
    assert clustering_id in run.output and json.loads(params)["seed"] == 3
    assert store.query("SELECT count(*) FROM cluster_assignments WHERE cluster = -1")[0][0] == 0

    listed = runner.invoke(app, [*db, "cluster", "list"])
    assert listed.exit_code == 0 and clustering_id[:8] in listed.output
    for out in (run.output, listed.output):  # issue 42: at 80 columns the headers read "insig… clust…"
        table = [line for line in out.splitlines() if "`" not in line]  # the notes under it wrap as one line
        assert "…" not in out and max(len(line) for line in table) <= 80, out
        assert {"clustering", "insights", "clusters", "outliers", "stability", "ARI"} <= set(out.split()), out
        assert clustering_id in out.split(), out

    evaluated = runner.invoke(app, [*db, "cluster", "evaluate", "--labels", "label"])
    assert evaluated.exit_code == 0, evaluated.output
    assert "ari" in evaluated.output and "Formatting Errors" in evaluated.output
    assert store.query("SELECT count(*) FROM cluster_evaluations")[0][0] == 1

    bad = runner.invoke(app, [*db, "cluster", "evaluate", "--labels", "nope"])
    assert bad.exit_code != 0
    for group in ("embed", "cluster"):
        help_out = runner.invoke(app, [group, "--help"])
        assert help_out.exit_code == 0


def test_invalid_clustering_options_are_named_without_a_traceback(db_path):
    result = CliRunner().invoke(app, ["--db", str(db_path), "cluster", "run", "--all-phases",
                                      "--selection", "nope", "--init", "bad"])
    from failatlas.core.errors import ConfigError

    assert result.exit_code != 0 and isinstance(result.exception, ConfigError)  # main() prints it as one line
    message = str(result.exception)
    assert "invalid clustering option" in message
    assert "init: Input should be 'spectral'" in message and "cluster_selection_method" in message

"""The explorer on a real store: every harness agent ran on the CPU mini-suite in Docker and was scored offline
(the `scored_mini_store` fixture). Overview numbers are the metrics module's; every run opens in the drill-down."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from failatlas.appdata import queries
from failatlas.store import Store

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.mark.slow
@pytest.mark.docker
def test_overview_and_every_run_of_a_real_benchmark(mini_store_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from failatlas.bench_core.scoring.metrics import run_scores

    monkeypatch.setenv("FAILATLAS_DB", str(mini_store_copy))
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    runs = at.dataframe[0].value
    store = Store(mini_store_copy)
    assert int(runs["runs"].sum()) == store.query("SELECT count(*) FROM runs")[0][0]
    scores = at.dataframe[2].value
    assert len(scores) == run_scores(store).select("agent", "model").unique().height
    # Without insights the mining pages say what to run, never fail.
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["page"] = "taxonomy"
    at.run()
    assert not at.exception and "failatlas ingest runs" in at.main.info[0].value
    run_ids = [r[0] for r in store.query("SELECT id FROM runs ORDER BY id")]
    for run_id in run_ids:
        detail = queries.run_detail(store, run_id)
        assert detail["task"] is not None and detail["task"]["question"]
    fault = store.query("SELECT id FROM runs WHERE agent = 'fault-missing-component' LIMIT 1")[0][0]
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(page="drill", run=fault)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(c.language == "diff" and c.value.startswith("diff --git") for c in at.code)
    outcome = store.query("SELECT outcome FROM validations WHERE run_id = ?", [fault])
    shown = "\n".join([m.value for m in at.markdown] + [i.value for i in at.info])
    if outcome:
        assert f"Outcome **`{outcome[0][0]}`**" in shown
    else:
        assert "The validator has not run on this run yet" in shown

"""The ingest stage contract on a real DuckDB file: params in, result out, one `stage_runs` row per call."""

from __future__ import annotations

import json

import pytest

from failatlas.core.errors import ConfigError, InputError
from failatlas.ingest import INSIGHT_IMPORTERS, FileIngestParams, RunsIngestParams, run_file, run_runs

from .conftest import table_snapshot


def _stage_runs(store, stage: str) -> list[dict]:
    return store.query_dicts(
        "SELECT id, params, status, summary, rows, seconds, code_version FROM stage_runs WHERE stage = ?"
        " ORDER BY started_at",
        [stage],
    )


def test_a_file_import_records_its_params_and_row_counts_with_its_writes(store, fixtures):
    params = FileIngestParams(paths=[fixtures / "good.csv"], options={"text_column": "summary",
                                                                      "phase_column": "stage"})
    result = run_file(store, params)
    (row,) = _stage_runs(store, "ingest.file")
    assert row["id"] == result.stage_run_id and row["status"] == "ok" and row["code_version"]
    recorded = json.loads(row["params"])
    assert recorded["paths"] == [str((fixtures / "good.csv").resolve())]
    assert recorded["options"] == {"text_column": "summary", "phase_column": "stage"}
    counts = json.loads(row["rows"])
    assert counts == {"insights": result.new_insights, "insight_sources": result.new_occurrences}
    assert result.new_occurrences == store.query("SELECT count(*) FROM insight_sources")[0][0] == 3
    again = run_file(store, params)
    assert again.new_occurrences == 0 and again.stage_run_id != result.stage_run_id
    assert [json.loads(r["rows"])["insight_sources"] for r in _stage_runs(store, "ingest.file")] == [3, 0]


def test_a_bad_file_writes_no_insight_and_its_run_is_recorded_as_failed(store, fixtures):
    run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"]))
    before = table_snapshot(store)
    with pytest.raises(InputError):
        run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl", fixtures / "bad.jsonl"]))
    assert table_snapshot(store) == before
    statuses = [r["status"] for r in _stage_runs(store, "ingest.file")]
    assert statuses == ["ok", "failed"]
    assert "bad.jsonl" in json.loads(_stage_runs(store, "ingest.file")[1]["summary"])["error"]


def test_formats_and_options_come_from_the_registered_importers(store, fixtures):
    assert INSIGHT_IMPORTERS.choices() == ["auto", "csv", "expbench", "inspect", "jsonl", "trail"]
    assert INSIGHT_IMPORTERS.get("trail").Options.model_fields.keys() == {"text_field"}
    assert {"text_column", "default_phase"} <= INSIGHT_IMPORTERS.get("csv").Options.model_fields.keys()
    assert "text_column" not in INSIGHT_IMPORTERS.get("inspect").Options.model_fields
    with pytest.raises(ConfigError, match="no insight importer takes the option"):
        run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"], options={"colour": "red"}))
    with pytest.raises(InputError, match="Input should be 'description' or 'evidence'"):
        run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"], options={"text_field": "title"}))
    assert store.query("SELECT count(*) FROM stage_runs")[0][0] == 0  # refused before the stage ran


def test_extraction_from_no_runs_is_still_one_recorded_stage_run(store):
    result = run_runs(store, RunsIngestParams())
    (row,) = _stage_runs(store, "ingest.runs")
    assert (result.occurrences, row["id"], row["status"]) == (0, result.stage_run_id, "ok")
    assert json.loads(row["params"]) == {"extractor": "deterministic", "run_ids": None, "redo": False,
                                        "rebuild": False}

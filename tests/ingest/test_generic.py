import json
import shutil

import pytest

from failatlas.core.errors import ConfigError, InputError
from failatlas.ingest import FileIngestParams, insight_id, run_file
from tests.ingest.conftest import table_snapshot


def test_jsonl_import_stores_identical_texts_once_with_their_count(store, fixtures):
    report = run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"]))
    assert (report.occurrences, report.new_occurrences, report.new_insights) == (4, 4, 3)
    rows = store.query_dicts("SELECT phase, text, n_occurrences FROM insights ORDER BY text")
    assert rows == [
        {"phase": "other", "text": "Loss curves were not plotted.", "n_occurrences": 1},
        {"phase": "implementation", "text": "The agent never set a random seed.", "n_occurrences": 2},
        {
            "phase": "conclusion",
            "text": "The conclusion ignores the confidence intervals.",
            "n_occurrences": 1,
        },
    ]
    source = store.query_dicts("SELECT * FROM insight_sources WHERE run_id = 'r1'")[0]
    assert source["insight_id"] == insight_id("implementation", "The agent never set a random seed.")
    assert (source["origin"], source["source_line"], source["label"], source["model"]) == (
        "jsonl",
        1,
        "reproducibility",
        "gpt-4o",
    )
    assert json.loads(source["detail"]) == {"tool": "manual-review"}
    assert source["source_file"] == str((fixtures / "good.jsonl").resolve())
    lines = [r[0] for r in store.query("SELECT source_line FROM insight_sources ORDER BY source_line")]
    assert lines == [1, 3, 4, 5]


def test_reimporting_the_same_file_adds_nothing(store, fixtures):
    run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"]))
    before = table_snapshot(store)
    again = run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"]))
    assert (again.occurrences, again.new_occurrences, again.new_insights) == (4, 0, 0)
    assert again.files[0].new_occurrences == 0
    assert table_snapshot(store) == before


def test_a_copy_of_a_file_elsewhere_counts_as_new_occurrences(store, fixtures, tmp_path):
    run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"]))
    copy = tmp_path / "copy.jsonl"
    shutil.copy(fixtures / "good.jsonl", copy)
    report = run_file(store, FileIngestParams(paths=[copy]))
    assert (report.new_occurrences, report.new_insights) == (4, 0)
    assert store.query("SELECT max(n_occurrences) FROM insights") == [(4,)]


def test_bad_jsonl_rows_are_reported_with_file_and_line_and_nothing_is_stored(store, fixtures):
    run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"]))
    before = table_snapshot(store)
    with pytest.raises(InputError) as caught:
        run_file(store, FileIngestParams(paths=[fixtures / "bad.jsonl"]))
    error = caught.value
    bad = str((fixtures / "bad.jsonl").resolve())
    assert error.path == bad and error.line == 3
    assert str(error).startswith(f"{bad}:3: invalid JSON")
    problems = {(line, field) for line, field, _ in error.problems}
    assert problems == {(3, None), (5, "text"), (6, "text"), (7, "phase")}
    assert f"{bad}:5 field 'text': missing text" in str(error)
    assert "unknown phase 'desing'" in str(error)
    assert table_snapshot(store) == before


def test_a_bad_file_in_a_folder_stops_the_whole_import(store, fixtures, tmp_path):
    shutil.copy(fixtures / "good.jsonl", tmp_path / "a.jsonl")
    shutil.copy(fixtures / "bad.jsonl", tmp_path / "b.jsonl")
    with pytest.raises(InputError, match="b.jsonl:3"):
        run_file(store, FileIngestParams(paths=[tmp_path]))
    assert store.query("SELECT count(*) FROM insight_sources") == [(0,)]


def test_csv_with_mapped_columns_keeps_record_start_lines_and_unknown_columns(store, fixtures):
    options = {"text_column": "summary", "phase_column": "stage", "label_column": "category"}
    report = run_file(store, FileIngestParams(paths=[fixtures / "good.csv"], options=options))
    assert (report.occurrences, report.new_insights) == (3, 2)
    rows = store.query_dicts(
        "SELECT s.source_line, s.label, s.task_id, s.paper_id, s.detail, i.phase, i.text, i.n_occurrences"
        " FROM insight_sources s JOIN insights i ON i.id = s.insight_id ORDER BY s.source_line"
    )
    assert [r["source_line"] for r in rows] == [2, 3, 6]
    assert rows[1]["text"] == "The baseline was run with a different tokenizer, so the comparison is unfair."
    assert rows[1]["phase"] == "implementation" and rows[1]["label"] == "baseline"
    assert json.loads(rows[0]["detail"]) == {"reviewer": "ann"}
    assert [r["n_occurrences"] for r in rows] == [2, 1, 2]
    assert {r["origin"] for r in store.query_dicts("SELECT origin FROM insight_sources")} == {"csv"}


def test_csv_without_the_text_column_names_the_column(store, fixtures):
    with pytest.raises(InputError, match=r"good.csv:1 field 'text': no column named 'text'"):
        run_file(store, FileIngestParams(paths=[fixtures / "good.csv"]))


def test_unknown_default_phase_and_format_are_refused(store, fixtures):
    with pytest.raises(InputError, match="unknown phase"):
        run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"], options={"default_phase": "testing"}))
    with pytest.raises(ConfigError, match="unknown insight format"):
        run_file(store, FileIngestParams(paths=[fixtures / "good.jsonl"], format="yaml"))
    with pytest.raises(InputError, match="no such file"):
        run_file(store, FileIngestParams(paths=[fixtures / "missing.jsonl"]))


def test_json_array_of_objects_is_a_generic_file(store, tmp_path):
    path = tmp_path / "insights.json"
    path.write_text(
        json.dumps([{"text": "No ablation.", "phase": "design"}, {"text": "No ablation.", "phase": "design"}])
    )
    report = run_file(store, FileIngestParams(paths=[path]))
    assert (report.files[0].format, report.new_occurrences, report.new_insights) == ("jsonl", 2, 1)

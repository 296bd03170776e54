import json
from collections import Counter

import pytest

from failatlas.core.errors import InputError
from failatlas.ingest import INSIGHT_IMPORTERS, FileIngestParams, run_file
from failatlas.ingest.importers.trail import TAXONOMY, normalise_category

README_LABELS = {
    "Formatting Errors": 124,
    "Instruction Non-compliance": 65,
    "Goal Deviation": 63,
    "Tool-related": 47,
    "Tool Selection Errors": 45,
    "Task Orchestration": 44,
    "Language-only": 41,
    "Resource Abuse": 39,
    "Poor Information Retrieval": 28,
    "Context Handling Failures": 24,
    "Incorrect Problem Identification": 19,
    "Tool Output Misinterpretation": 16,
    "Environment Setup Errors": 9,
    "Resource Not Found": 7,
    "Authentication Errors": 5,
    "Tool Definition Issues": 3,
    "Service Errors": 2,
    "Timeout Issues": 2,
    "Resource Exhaustion": 2,
}


@pytest.fixture(scope="module")
def trail(shared_data):
    return (shared_data / "trail").resolve()


def _labels(store) -> Counter:
    return Counter(dict(store.query("SELECT label, count(*) FROM insight_sources GROUP BY label")))


def test_trail_jsonl_gives_585_labelled_occurrences(store, trail):
    path = trail / "trail_errors_gaia.jsonl"
    assert INSIGHT_IMPORTERS.detect(path) == "trail"
    report = run_file(store, FileIngestParams(paths=[path]))
    assert (report.occurrences, report.new_occurrences) == (585, 585)
    assert _labels(store) == README_LABELS
    assert store.query("SELECT sum(n_occurrences), count(DISTINCT phase) FROM insights") == [(585, 1)]
    # One row has no description: its evidence is used, and the import says so.
    assert report.warnings == [f"{path}:119: empty description; used evidence instead"]
    row = store.query_dicts("SELECT * FROM insight_sources WHERE source_line = 1")[0]
    assert (row["label"], row["task_id"], row["benchmark"], row["source_field"]) == (
        "Instruction Non-compliance",
        "0035f455b3ff2295167a844f04d85d34",
        "trail-gaia",
        "description",
    )
    detail = json.loads(row["detail"])
    assert detail["category_top"] == "Reasoning Errors" and detail["category_mid"] == "Output Generation"
    assert detail["impact"] == "LOW" and detail["location"] == "98fa1dda65ab168b"


def test_trail_folder_with_its_trailing_comma_file_matches_the_jsonl(store, trail):
    folder = trail / "annotations_gaia"
    report = run_file(store, FileIngestParams(paths=[folder]))
    assert len(report.files) == 117 and report.occurrences == 585
    assert _labels(store) == README_LABELS
    comma = [w for w in report.warnings if "trailing comma" in w]
    assert comma == [
        f"{folder / 'a96c6811716c0473b86a23321db79c34.json'}:38: trailing comma before ']' "
        "accepted (the file is not strict JSON)"
    ]
    # The same errors from the flattened file are the same occurrences: nothing is counted twice.
    again = run_file(store, FileIngestParams(paths=[trail / "trail_errors_gaia.jsonl"]))
    assert again.new_occurrences == 0
    assert store.query("SELECT sum(n_occurrences) FROM insights") == [(585,)]


def test_trail_evidence_as_text_and_dedup_of_repeated_texts(store, trail):
    params = FileIngestParams(paths=[trail / "trail_errors_gaia.jsonl"], options={"text_field": "evidence"})
    report = run_file(store, params)
    assert report.occurrences == 585 and report.warnings == []
    assert store.query("SELECT count(DISTINCT source_field) FROM insight_sources") == [(1,)]
    n_insights, n_occ, top = store.query(
        "SELECT count(*), sum(n_occurrences), max(n_occurrences) FROM insights"
    )[0]
    assert n_occ == 585 and n_insights < 585 and top > 1
    top_id = store.query("SELECT id FROM insights ORDER BY n_occurrences DESC LIMIT 1")[0][0]
    assert store.query("SELECT count(*) FROM insight_sources WHERE insight_id = ?", [top_id]) == [(top,)]


def test_category_spellings_are_normalised_to_the_taxonomy():
    assert normalise_category(" Incorrect Problem Identification") == "Incorrect Problem Identification"
    assert normalise_category("Goal deviation") == "Goal Deviation"
    assert normalise_category("Context Handling Failure") == "Context Handling Failures"
    assert normalise_category("Tool Selection") == "Tool Selection Errors"
    assert normalise_category("Task Orchestration Errors") == "Task Orchestration"
    assert set(README_LABELS) <= set(TAXONOMY)


def test_broken_annotation_file_names_its_line_and_commas_inside_strings_are_kept(store, tmp_path):
    folder = tmp_path / "annotations_gaia"
    folder.mkdir()
    good = folder / "t1.json"
    good.write_text(
        '{"trace_id": "t1", "errors": [\n  {"category": "Goal deviation", "location": "a",\n'
        '   "evidence": "x, }", "description": "Stopped early, ]", "impact": "LOW"},\n]}\n'
    )
    report = run_file(store, FileIngestParams(paths=[good]))
    assert report.warnings == [f"{good}:3: trailing comma before ']' accepted (the file is not strict JSON)"]
    row = store.query_dicts(
        "SELECT i.text, s.label, s.benchmark FROM insight_sources s JOIN insights i ON i.id = s.insight_id"
    )[0]
    assert row == {"text": "Stopped early, ]", "label": "Goal Deviation", "benchmark": "trail-gaia"}
    broken = folder / "t2.json"
    broken.write_text(
        '{"trace_id": "t2", "errors": [\n  {"category": "Goal Deviation"\n  "evidence": "x"}]}\n'
    )
    with pytest.raises(InputError, match=r"t2.json:3: invalid JSON"):
        run_file(store, FileIngestParams(paths=[broken], format="trail"))

import json
import zipfile

import pytest

from failatlas.core.errors import InputError
from failatlas.ingest import INSIGHT_IMPORTERS, FileIngestParams, run_file
from failatlas.ingest.importers.inspect_log import value_to_float

LOG = "inspect/2025-06-02T09-14-05+00-00_research-repro_Fk3jQ9pLmZ2.json"


def _rows(store):
    return store.query_dicts(
        "SELECT i.phase, i.text, s.* FROM insight_sources s JOIN insights i ON i.id = s.insight_id"
        " ORDER BY s.source_key"
    )


def test_failed_samples_of_an_inspect_json_log_become_insights(store, fixtures):
    path = fixtures / LOG
    assert INSIGHT_IMPORTERS.detect(path) == "inspect"
    report = run_file(store, FileIngestParams(paths=[path]))
    rows = _rows(store)
    assert [(r["task_id"], r["phase"], r["text"]) for r in rows] == [
        (
            "bert-ablation",
            "other",
            "The submission reports scores on the validation split instead of the test split.",
        ),
        ("bert-ablation", "other", "It also omits the baseline with NSP, so no comparison is possible."),
        ("gnn-depth", "design", "The design only tries two depths, too few to show where accuracy peaks."),
        ("vit-patch-size", "execution", "Execution failed: required Python module is not installed"),
    ]
    first = rows[0]
    assert (first["origin"], first["benchmark"], first["model"], first["agent"], first["run_id"]) == (
        "inspect",
        "research-repro",
        "openai/gpt-4o-mini",
        "basic_agent",
        "S8cWzq3hLkN5yYf6uJ2pXa",
    )
    assert first["source_field"] == "samples[1].scores.model_graded_qa.explanation"
    assert json.loads(first["detail"])["value"] == "I"
    assert json.loads(rows[3]["detail"])["module"] == "timm"
    # The partial "P" score of gnn-depth has no explanation: counted as skipped, not invented.
    assert report.skipped == [
        f"{path.resolve()} samples[3] (id gnn-depth) failed model_graded_qa without explanation"
    ]


def test_eval_zip_form_of_the_same_log_counts_once(store, fixtures, tmp_path):
    log = json.loads((fixtures / LOG).read_text())
    samples = log.pop("samples")
    archive = tmp_path / "research-repro.eval"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(
            "_journal/start.json", json.dumps({"version": 2, "eval": log["eval"], "plan": log["plan"]})
        )
        for sample in samples:
            zf.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
        zf.writestr("header.json", json.dumps(log))
    report = run_file(store, FileIngestParams(paths=[archive]))
    assert (report.files[0].format, report.new_occurrences) == ("inspect", 4)
    assert run_file(store, FileIngestParams(paths=[fixtures / LOG])).new_occurrences == 0


def test_a_json_file_that_is_not_an_eval_log_is_refused(store, tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"eval": {"model": "m"}, "samples": []}))
    with pytest.raises(InputError, match="field 'eval'"):
        run_file(store, FileIngestParams(paths=[path], format="inspect"))
    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a valid .eval archive"):
        run_file(store, FileIngestParams(paths=[broken]))


def test_score_values_read_like_inspect():
    assert [value_to_float(v) for v in ("C", "I", "P", "N", True, 0.25, "yes", "no", "0.5", "maybe")] == [
        1.0,
        0.0,
        0.5,
        0.0,
        1.0,
        0.25,
        1.0,
        0.0,
        0.5,
        None,
    ]


def test_real_zstd_eval_log_written_by_inspect(store, fixtures):
    """`research-repro-real.eval` was written by inspect-ai 0.3.285 itself (see make_real_eval_log.py)."""
    path = fixtures / "inspect" / "research-repro-real.eval"
    report = run_file(store, FileIngestParams(paths=[path]))
    rows = _rows(store)
    assert [(r["task_id"], r["phase"], r["text"]) for r in rows] == [
        (
            "bert-ablation",
            "design",
            "The submission reports scores on the validation split instead of the test split.",
        ),
        ("bert-ablation", "design", "It also omits the baseline."),
        ("gnn-depth", "design", "The design only tries two depths, too few to show where accuracy peaks."),
        ("vit-patch-size", "execution", "Execution failed: required Python module is not installed"),
    ]
    assert {(r["benchmark"], r["model"], r["agent"]) for r in rows} == {
        ("research_repro", "mockllm/model", "maybe_crash+generate")
    }
    assert json.loads(rows[3]["detail"])["module"] == "timm"
    assert report.skipped == []

"""benchmarks/quality_trail.py reads any TRAIL split: the flattened JSONL or the per-trace annotation files."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from failatlas.core.errors import InputError
from failatlas.ingest import FileIngestParams, run_file
from failatlas.ingest.importers.trail import TAXONOMY, normalise_category
from failatlas.ingest.model import normalise_text
from failatlas.store import open_store

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import quality_trail as qt  # noqa: E402

EMPTY_DESCRIPTION = ("3acaa3150977e199eddb95c64f2ada2e", 3)  # the one GAIA error without a description


@pytest.fixture(scope="module")
def trail(shared_data: Path) -> Path:
    """The TRAIL GAIA files; missing data fails the tests, as everywhere in the suite (a skip would prove nothing)."""
    folder = shared_data / "trail"
    if not (folder / "annotations_gaia").is_dir() or not (folder / "trail_errors_gaia.jsonl").is_file():
        raise RuntimeError(f"the TRAIL GAIA data is not in {folder}; set FAILATLAS_SHARED_DATA")
    return folder


def _contents(store) -> tuple[list, list, list]:
    insights = store.query("SELECT id, text, n_occurrences FROM insights ORDER BY id")
    sources = store.query(
        "SELECT source_key, insight_id, label, task_id, benchmark FROM insight_sources ORDER BY source_key"
    )
    return insights, sources, qt.majority_label(store, [row[0] for row in insights])


def test_gaia_folder_and_jsonl_give_the_same_insights_and_labels(trail, tmp_path):
    folder, jsonl = qt.read_trail(trail / "annotations_gaia"), qt.read_trail(trail / "trail_errors_gaia.jsonl")
    assert (len(folder.rows), folder.files, len(jsonl.rows)) == (585, 117, 585)
    assert folder.splits == jsonl.splits == ["GAIA"]
    assert folder.warnings == [
        f"{trail / 'annotations_gaia' / 'a96c6811716c0473b86a23321db79c34.json'}:38: trailing comma before ']' "
        "accepted (the file is not strict JSON)"
    ]
    # the normalised category is the JSONL's own `category` column, row by row
    raw = [json.loads(line) for line in (trail / "trail_errors_gaia.jsonl").read_text().splitlines() if line.strip()]
    assert [r["category"] for r in jsonl.rows] == [r["category"] for r in raw]
    assert [normalise_category(r["category_raw"]) for r in raw] == [r["category"] for r in raw]
    assert [(r["trace_id"], r["error_idx"], r["category"], r["description"]) for r in folder.rows] == [
        (r["trace_id"], r["error_idx"], r["category"], r["description"]) for r in jsonl.rows
    ]
    # both readers see the same single empty description (the annotation file's is lost in malformed keys)
    assert [(r["trace_id"], r["error_idx"]) for r in folder.rows if r["description"] is None] == [EMPTY_DESCRIPTION]
    assert [(r["trace_id"], r["error_idx"]) for r in jsonl.rows if r["description"] is None] == [EMPTY_DESCRIPTION]

    stores = {}
    for name, path in (("folder", trail / "annotations_gaia"), ("jsonl", trail / "trail_errors_gaia.jsonl")):
        stores[name] = open_store(tmp_path / f"{name}.duckdb")
        assert qt.load_trail(stores[name], path) == 584  # the empty description is left out, as before
    folder_contents, jsonl_contents = _contents(stores["folder"]), _contents(stores["jsonl"])
    assert len(folder_contents[0]) == 501
    assert folder_contents == jsonl_contents
    assert {row[4] for row in folder_contents[1]} == {"GAIA"}
    assert Counter(folder_contents[2]).most_common(1) == [("Formatting Errors", 80)]
    assert len(set(folder_contents[2])) == 19


def test_the_empty_description_is_left_out_where_the_importer_uses_the_evidence(trail, tmp_path):
    """The product's importer keeps all 585 errors (the empty description's evidence as its text); the script
    leaves that one out by default so that its 501 insights stay as in every earlier result, and takes the
    importer's choice with `empty_description="evidence"`."""
    store = open_store(tmp_path / "ingest.duckdb")
    report = run_file(store, FileIngestParams(paths=[trail / "annotations_gaia"]))
    assert report.occurrences == 585
    assert [w for w in report.warnings if "empty description" in w] == [
        # the importer names files by their resolved path: the data folder may be behind a symbolic link
        f"{trail.resolve() / 'annotations_gaia' / (EMPTY_DESCRIPTION[0] + '.json')} errors[3]: empty description;"
        " used evidence instead"
    ]
    (imported,) = store.query("SELECT i.text FROM insights i JOIN insight_sources s ON s.insight_id = i.id"
                              " WHERE s.task_id = ? AND s.source_field = 'errors[3].evidence'", [EMPTY_DESCRIPTION[0]])

    for path in (trail / "annotations_gaia", trail / "trail_errors_gaia.jsonl"):
        mine = open_store(tmp_path / f"evidence-{path.stem}.duckdb")
        assert qt.load_trail(mine, path, empty_description="evidence") == 585
        assert mine.query("SELECT count(*) FROM insights") == [(502,)]
        (text,) = mine.query("SELECT i.text FROM insights i JOIN insight_sources s ON s.insight_id = i.id"
                             " WHERE s.source_key = ?", [f"trail:{EMPTY_DESCRIPTION[0]}:{EMPTY_DESCRIPTION[1]}"])
        assert normalise_text(text[0]) == imported[0]


def test_half_splits_the_traces_by_id_parity(trail, tmp_path):
    rows = qt.read_trail(trail / "annotations_gaia").rows
    halves = [qt.select_rows(rows, half) for half in (0, 1)]
    assert [len(h) for h in halves] == [271, 313]
    assert all(int(r["trace_id"], 16) % 2 == k for k, h in enumerate(halves) for r in h)
    store = open_store(tmp_path / "half.duckdb")
    assert qt.load_trail(store, trail / "annotations_gaia", half=1) == 313


SWE_ROWS = [
    ("a1", 0, "Formatting Error", "The patch was emitted without the diff header."),
    ("a1", 1, "Rate Limiting", "The agent hit the API rate limit and retried at once."),
    ("b2", 0, "goal deviation", "The agent refactored an unrelated module."),
    ("b2", 1, "  Tool-related ", "The agent invented a `run_tests` tool."),
    ("c3", 0, "Timeout Issue", "The test run exceeded the sandbox time limit."),
    ("c3", 1, "Rate Limiting", "The agent hit the API rate limit and retried at once."),
]


def _swe_jsonl(tmp_path: Path, rows=SWE_ROWS, split: str | None = "SWE Bench") -> Path:
    path = tmp_path / "trail_errors_swe.jsonl"
    lines = [
        json.dumps({**({"split": split} if split else {}), "trace_id": t, "error_idx": i, "category": c,
                    "evidence": "...", "description": d, "impact": "LOW", "location": "x"})
        for t, i, c, d in rows
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_swe_like_jsonl_loads_with_normalised_labels_and_its_split(tmp_path):
    path = _swe_jsonl(tmp_path)
    data = qt.read_trail(path)
    assert data.splits == ["SWE Bench"]
    assert [r["category"] for r in data.rows] == [
        "Formatting Errors", "Rate Limiting", "Goal Deviation", "Tool-related", "Timeout Issues", "Rate Limiting"
    ]
    store = open_store(tmp_path / "swe.duckdb")
    assert qt.load_trail(store, path, data=data) == 6
    sources = store.query("SELECT source_key, label, task_id, benchmark, source_file, source_line FROM insight_sources"
                          " ORDER BY source_key")
    assert sources[0] == ("trail:a1:0", "Formatting Errors", "a1", "SWE Bench", path.name, 1)
    assert {s[3] for s in sources} == {"SWE Bench"}
    assert store.query("SELECT count(*), sum(n_occurrences) FROM insights") == [(5, 6)]  # a repeated description
    ids = [row[0] for row in store.query("SELECT id FROM insights ORDER BY id")]
    assert set(qt.majority_label(store, ids)) == {
        "Formatting Errors", "Rate Limiting", "Goal Deviation", "Tool-related", "Timeout Issues"
    }
    # without a `split` column the file name says it (trail_errors_<split>.jsonl)
    assert qt.read_trail(_swe_jsonl(tmp_path, split=None)).splits == ["SWE"]


def test_annotation_files_of_another_split_take_the_folder_name(tmp_path):
    folder = tmp_path / "annotations_swe_bench"
    folder.mkdir()
    (folder / "d4.json").write_text(
        '{"trace_id": "d4", "errors": [{"category": "Rate limiting", "location": "x", "evidence": "429",'
        ' "description": "The agent ignored a 429 response.", "impact": "HIGH"},], "scores": []}'
    )
    data = qt.read_trail(folder)
    assert [(r["trace_id"], r["category"], r["benchmark"]) for r in data.rows] == [
        ("d4", "Rate Limiting", "SWE_BENCH")
    ]
    assert len(data.warnings) == 1 and "trailing comma" in data.warnings[0]
    assert qt.read_trail(folder / "d4.json").rows == data.rows  # one annotation file alone


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, list[str]]]:
    """Each bad input and what its one-line error must name."""
    cases: dict[str, tuple[Path, list[str]]] = {}
    cases["missing path"] = (tmp_path / "nope.jsonl", ["nope.jsonl", "no such file or folder"])
    (tmp_path / "empty.jsonl").write_text("\n\n")
    cases["empty jsonl"] = (tmp_path / "empty.jsonl", ["empty.jsonl", "empty file"])
    (tmp_path / "empty_folder").mkdir()
    cases["empty folder"] = (tmp_path / "empty_folder", ["empty_folder", "no TRAIL annotation files"])
    (tmp_path / "annotations_x").mkdir()
    (tmp_path / "annotations_x" / "e.json").write_text("")
    cases["empty annotation file"] = (tmp_path / "annotations_x", ["e.json", "empty file"])
    (tmp_path / "annotations_y").mkdir()
    (tmp_path / "annotations_y" / "f.json").write_text('{"trace_id": "f", "errors": []}')
    cases["no errors in the folder"] = (tmp_path / "annotations_y", ["annotations_y", "no annotated errors"])
    rows = [json.loads(line) for line in _swe_jsonl(tmp_path).read_text().splitlines()]
    for name, change, expected in [
        ("no category", lambda r: r.pop("category"), [":3 field 'category'", "missing category"]),
        ("no trace_id", lambda r: r.pop("trace_id"), [":3 field 'trace_id'", "missing trace_id"]),
        ("unknown category", lambda r: r.update(category="Hallucination Cascade"),
         [":3 field 'category'", "'Hallucination Cascade' is not one of TRAIL's 20"]),
    ]:
        bad = [dict(r) for r in rows]
        change(bad[2])
        path = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in bad) + "\n")
        cases[name] = (path, [path.name, *expected])
    (tmp_path / "annotations_z").mkdir()
    (tmp_path / "annotations_z" / "g.json").write_text(
        '{"trace_id": "g", "errors": [{"category": "Goal Deviation", "description": "d"}, {"description": "e"}]}'
    )
    cases["annotation without category"] = (tmp_path / "annotations_z", ["g.json field 'errors[1].category'"])
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join(json.dumps(r) for r in [*rows, rows[1]]) + "\n")
    cases["an error twice"] = (twice, ["twice.jsonl", f"trace {rows[1]['trace_id']} appears twice", ":2 and"])
    return cases


@pytest.mark.parametrize("case", [
    "missing path", "empty jsonl", "empty folder", "empty annotation file", "no errors in the folder",
    "no category", "no trace_id", "unknown category", "annotation without category", "an error twice",
])
def test_bad_data_stops_with_one_line_naming_file_and_field(case, tmp_path, capsys):
    path, expected = _bad_inputs(tmp_path)[case]
    with pytest.raises(InputError) as raised:
        qt.read_trail(path)
    message = raised.value.one_line()
    assert "\n" not in message and all(e in message for e in expected), message
    with pytest.raises(SystemExit) as exited:
        qt.main(["--data", str(path), "--db", str(tmp_path / "never.duckdb")])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"quality_trail: error: {message}"
    assert not (tmp_path / "never.duckdb").exists()  # stopped before any store was made


def test_a_half_without_rows_stops_too(tmp_path):
    path = _swe_jsonl(tmp_path, rows=[("a2", 0, "Rate Limiting", "Too many requests.")])  # 0xa2 is even
    with pytest.raises(InputError, match="no errors with a description in half 1"):
        qt.load_trail(open_store(tmp_path / "s.duckdb"), path, half=1)


def test_the_script_exits_non_zero_with_one_line(tmp_path):
    result = subprocess.run([sys.executable, str(BENCHMARKS / "quality_trail.py"), "--data", str(tmp_path / "x")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"quality_trail: error: {tmp_path / 'x'}: no such file or folder ({qt.DATA_HINT})"
    ]
    assert result.stdout == ""


def test_every_trail_category_is_accepted(tmp_path):
    rows = [(f"{k:x}", 0, name, f"error {k}") for k, name in enumerate(TAXONOMY)]
    assert sorted(r["category"] for r in qt.read_trail(_swe_jsonl(tmp_path, rows=rows)).rows) == sorted(TAXONOMY)

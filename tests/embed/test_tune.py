"""`failatlas embed tune` on a real small store (ingested, labelled and embedded through the CLI) with the real
all-MiniLM-L6-v2 weights: the tuned folder and its provenance, the embedding set it makes, re-tuning into the same
folder (a new revision, vectors computed again), nothing left behind by an interrupt, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.embed import list_sets, resolve_model
from failatlas.embed.sets import set_provenance
from failatlas.embed.tune import PROVENANCE_FILE, TuneParams, tune
from failatlas.store import open_store

STATEMENTS = {
    "Output format": ["The final answer was prose where a JSON object was required",
                      "The reply lacked the closing tag the format asks for",
                      "Numbers were printed with units although the answer must be a bare number",
                      "The answer was wrapped in markdown fences the checker cannot parse"],
    "Tool misuse": ["The agent called the search tool with an empty query",
                    "A web page was fetched with a malformed URL argument",
                    "The agent passed a file path to a tool that expects a search string",
                    "The python tool was called without the code argument"],
    "Gave up early": ["The agent stopped after the first failed attempt",
                      "It declared the task impossible without trying another source",
                      "The run ended with a guess instead of finishing the steps",
                      "The agent abandoned the plan halfway and answered from memory"],
}
pytestmark = pytest.mark.slow

FAST = ["--max-steps", "2", "--batch-size", "8", "--device", "cpu"]


def _cli(db: Path, *args: str):  # noqa: ANN202
    return CliRunner().invoke(app, ["--db", str(db), *args])


@pytest.fixture
def labelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store of 12 statements ingested by `ingest file`, 9 of them labelled by `failatlas label add`."""
    monkeypatch.setenv("FAILATLAS_NO_PROGRESS", "1")
    monkeypatch.setenv("COLUMNS", "300")
    db = tmp_path / "store.duckdb"
    source = tmp_path / "statements.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for texts in STATEMENTS.values() for t in texts))
    assert _cli(db, "ingest", "file", str(source)).exit_code == 0
    store = open_store(db)
    id_of = dict((t, i) for i, t in store.query("SELECT id, text FROM insights"))
    for label, texts in STATEMENTS.items():
        result = _cli(db, "label", "add", *[id_of[t] for t in texts[:3]], "--as", label)
        assert result.exit_code == 0, result.output
    return db


def test_tune_writes_a_model_with_provenance_that_embed_run_uses_as_a_new_set(labelled, tmp_path):
    folder = tmp_path / "tuned"
    result = _cli(labelled, "embed", "tune", str(folder), *FAST)
    assert result.exit_code == 0, result.output
    assert "on 9 labelled statements in 3 categories" in result.output and "2 steps" in result.output
    assert "step 2/2: loss" in result.output  # progress
    record = json.loads((folder / PROVENANCE_FILE).read_text())
    base_source, base_revision = resolve_model("all-MiniLM-L6-v2")
    assert record["base_model"] == "all-MiniLM-L6-v2" and record["base_revision"] == base_revision
    assert record["labels"]["n_statements"] == 9 and record["labels"]["by_source"] == {"labels": 9}
    assert len(record["labels"]["hash"]) == 16 and record["labels"]["per_category"]["Tool misuse"] == 3
    assert record["steps"] == 2 and record["epochs"] == 3 and record["seed"] == 0
    assert record["loss"]["name"].startswith("supervised contrastive") and record["loss"]["first"] > 0
    assert {"torch", "sentence-transformers", "failatlas"} <= set(record["versions"])
    weights = folder / "model.safetensors"
    assert weights.read_bytes() != (Path(base_source) / "model.safetensors").read_bytes()  # it trained
    assert not list(tmp_path.glob(".tuned*"))  # no temporary folder left

    assert _cli(labelled, "embed", "run", "--device", "cpu").exit_code == 0
    tuned_run = _cli(labelled, "embed", "run", "--model", str(folder), "--device", "cpu")
    assert tuned_run.exit_code == 0, tuned_run.output
    assert "12 embedded, 0 cached" in tuned_run.output
    store = open_store(labelled)
    sets = {s.model: s for s in list_sets(store)}
    assert set(sets) == {"all-MiniLM-L6-v2", str(folder)}
    assert set_provenance(store, sets[str(folder)].id) == record  # the set keeps the folder's record
    assert set_provenance(store, sets["all-MiniLM-L6-v2"].id) is None
    (summary,) = store.query("SELECT summary FROM stage_runs WHERE stage = 'embed.tune'")[0]
    assert json.loads(summary)["provenance"]["labels"]["hash"] == record["labels"]["hash"]


def test_retuning_into_the_same_folder_changes_the_revision_and_the_vectors_are_computed_again(labelled, tmp_path):
    folder = tmp_path / "tuned"
    assert _cli(labelled, "embed", "tune", str(folder), *FAST).exit_code == 0
    first = resolve_model(str(folder))[1]
    assert _cli(labelled, "embed", "run", "--model", str(folder), "--device", "cpu").exit_code == 0
    again = _cli(labelled, "embed", "tune", str(folder), *FAST, "--seed", "1")
    assert again.exit_code == 0, again.output
    second = resolve_model(str(folder))[1]
    assert second != first and second.startswith("dir+")
    rerun = _cli(labelled, "embed", "run", "--model", str(folder), "--device", "cpu")
    assert "12 embedded, 0 cached" in rerun.output  # not the old vectors
    assert len({s.revision for s in list_sets(open_store(labelled)) if s.model == str(folder)}) == 2
    assert json.loads((folder / PROVENANCE_FILE).read_text())["seed"] == 1
    assert not list(tmp_path.glob(".tuned*"))


def test_an_interrupt_leaves_no_folder_and_records_the_run_as_interrupted(labelled, tmp_path):
    folder = tmp_path / "tuned"

    def stop(step: int, steps: int, loss: float) -> None:
        raise KeyboardInterrupt

    store = open_store(labelled)
    with pytest.raises(KeyboardInterrupt):
        tune(store, TuneParams(folder=str(folder), max_steps=2, batch_size=8, device="cpu"), progress=stop)
    assert not folder.exists() and not list(tmp_path.glob(".tuned*"))
    assert store.query("SELECT status FROM stage_runs WHERE stage = 'embed.tune'") == [("interrupted",)]


def _main(db: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed entry point in a process of its own: what a user sees, exit code and stderr included."""
    return subprocess.run([sys.executable, "-m", "failatlas", "--db", str(db), *args], capture_output=True,
                          text=True, env={**os.environ, "FAILATLAS_NO_PROGRESS": "1", "COLUMNS": "300"},
                          timeout=300)


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_bad_inputs_are_one_line_errors(labelled, tmp_path):
    empty = tmp_path / "empty.duckdb"
    line = _one_line_error(_main(empty, "embed", "tune", str(tmp_path / "m"), *FAST))
    assert "nothing to tune on: no stored labels and no --examples" in line

    one = tmp_path / "one.jsonl"
    one.write_text("".join(json.dumps({"text": t, "label": "Output format"}) + "\n"
                           for t in STATEMENTS["Output format"]))
    line = _one_line_error(_main(empty, "embed", "tune", str(tmp_path / "m"), "--examples", str(one), *FAST))
    assert "at least two labels with two statements each" in line and "'Output format' (4)" in line

    theirs = tmp_path / "someone_elses_model"
    theirs.mkdir()
    (theirs / "config.json").write_text("{}")
    line = _one_line_error(_main(labelled, "embed", "tune", str(theirs), *FAST))
    assert "did not write" in line and "left alone" in line
    assert [p.name for p in theirs.iterdir()] == ["config.json"]

    unlabelled = tmp_path / "bad.csv"
    unlabelled.write_text("text,label\nThe agent looped,Tool misuse\nIt stopped early,\n")
    line = _one_line_error(_main(labelled, "embed", "tune", str(tmp_path / "m"), "--examples", str(unlabelled),
                                 *FAST))
    assert "bad.csv:3" in line and "needs a label" in line
    line = _one_line_error(_main(labelled, "embed", "tune", str(tmp_path / "m"), "--max-steps", "0"))
    assert "--max-steps must be 1..2000" in line
    assert not (tmp_path / "m").exists()

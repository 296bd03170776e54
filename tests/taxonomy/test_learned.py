"""Seeds that learn from labelled examples and from a person's labels, on the real TRAIL GAIA data with the real
all-MiniLM-L6-v2 vectors: the learned assignment, its calibration, category spelling, examples never stored,
labels kept by content across rebuilds and re-ingests, and the quality report's accuracy figures."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn.cluster import KMeans
from typer.testing import CliRunner

from failatlas.cluster.metrics import quality_metrics
from failatlas.core.errors import InputError, NotFoundError
from failatlas.core.hashing import text_hashes
from failatlas.embed import DEFAULT_MODEL, EmbedParams, find_embedding_set, load_insight_vectors
from failatlas.embed import run as embed
from failatlas.embed.models import resolve_model
from failatlas.embed.writes import ensure_set, write_vectors
from failatlas.ingest import FileIngestParams, run_file
from failatlas.store import Store, open_store
from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.evaluate import evaluate_taxonomy
from failatlas.taxonomy.labels import label_file, label_insights, label_type, list_labels, remove_labels
from failatlas.taxonomy.learned import (
    LabelModel,
    label_key,
    match_seed,
    read_examples,
    same_category,
    training_set,
)
from failatlas.taxonomy.seeding import load_seed
from tests.taxonomy.fill import add_clustering


def half(trace_id: str) -> int:
    """Trace-disjoint halves, as benchmarks/quality_trail.py makes them (hex id parity)."""
    try:
        return int(trace_id, 16) % 2
    except ValueError:
        return hashlib.sha256(trace_id.encode()).digest()[-1] % 2


@pytest.fixture(scope="module")
def gaia(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """TRAIL GAIA as the halves' JSONL files, and one store per half and one of both: ingested by `ingest file`,
    embedded by the embed stage (real MiniLM), clustered by k-means (the cluster stage's own runs are measured in
    the benchmark; here the taxonomy is under test)."""
    folder = tmp_path_factory.mktemp("gaia")
    source = shared_data / "trail" / "trail_errors_gaia.jsonl"
    lines = [line for line in source.read_text().splitlines() if line.strip()]
    files = {}
    for h in (0, 1):
        files[h] = folder / f"trail_errors_half{h}.jsonl"
        files[h].write_text("\n".join(x for x in lines if half(json.loads(x)["trace_id"]) == h) + "\n")
    stores, vector_of = {}, {}
    for name, paths in (("both", [source]), ("half1", [files[1]])):
        store = open_store(folder / f"{name}.duckdb")
        run_file(store, FileIngestParams(paths=paths))
        if vector_of:  # half1's statements are all in "both", embedded there: their vectors are handed over, once
            texts = [text for (text,) in store.query("SELECT DISTINCT text FROM insights ORDER BY text")]
            with store.write() as conn:
                embedding_set = ensure_set(conn, DEFAULT_MODEL, resolve_model(DEFAULT_MODEL)[1], "none",
                                           len(next(iter(vector_of.values()))))
                write_vectors(conn, embedding_set, text_hashes(texts), np.stack([vector_of[t] for t in texts]))
        # the embed stage, which finds every vector of half1 stored and so embeds nothing again there
        embedded = embed(store, EmbedParams(model=DEFAULT_MODEL, normalise="none", device="cpu"))
        assert name == "both" or embedded.n_new == 0, embedded
        data = load_insight_vectors(store, find_embedding_set(store, model=DEFAULT_MODEL, normalise="none"))
        vector_of = vector_of or dict(zip(data.texts, data.vectors, strict=True))
        clusters = KMeans(12, n_init=3, random_state=0).fit_predict(data.vectors)
        add_clustering(store, f"cl-{name}", "other", data.ids, clusters, model=DEFAULT_MODEL,
                       embedding_set_id=data.embedding_set.id)
        stores[name] = folder / f"{name}.duckdb"
    return {"files": files, "stores": stores, "folder": folder}


def _copy(gaia: dict, name: str, tmp_path: Path) -> Store:
    path = tmp_path / f"{name}.duckdb"
    shutil.copy(gaia["stores"][name], path)
    return open_store(path)


def _truth(store: Store) -> dict[str, tuple[str, str]]:
    """insight id -> (majority human label, trace id of its first source)."""
    rows = store.query(
        "SELECT insight_id, label, min(task_id) FROM insight_sources GROUP BY insight_id, label"
        " ORDER BY insight_id, count(*) DESC, label")
    out: dict[str, tuple[str, str]] = {}
    for iid, label, trace in rows:
        out.setdefault(iid, (label, trace))
    return out


def _ari(store: Store, taxonomy_id: str, ids: list[str], truth: dict) -> float:
    types = dict(store.query("SELECT insight_id, failure_type_id FROM insight_failure_types WHERE taxonomy_id = ?",
                             [taxonomy_id]))
    codes = {t: k for k, t in enumerate(sorted(set(types.values())))}
    return quality_metrics([truth[i][0] for i in ids], [codes[types[i]] for i in ids])["ari"]


def test_labels_name_seed_categories_as_the_data_spells_them():
    cats = load_seed("trail").categories_for("other")
    assert label_key("Formatting Errors") == label_key("Formatting error") == ("formatting",)
    assert match_seed("Formatting Errors", cats).name == "Formatting error"
    assert match_seed("Tool-related", cats).name == "Tool-related hallucination"
    assert match_seed("Timeout Issues", cats).name == "Timeout"
    assert match_seed("Context Handling Failures", cats).name == "Context handling failure"
    assert match_seed("Resource", cats) is None  # three categories start so: none is chosen
    assert match_seed("Flaky GPU driver", cats) is None
    assert same_category("Goal Deviation", "Goal deviation") and not same_category("Goal Deviation", "Timeout")


def test_a_label_spelled_as_a_topic_shows_the_seeds_failure_name():
    seed = load_seed("trail")
    examples = [("The plan skipped a step", "Task Orchestration"), ("No closing tag", "Formatting Errors"),
                ("It made up a year", "Language-only"), ("Wrong arguments to the tool", "Incorrect tool args")]
    data, categories = training_set(seed, examples, [], "other", seed_rows=False)
    assert data.labels == ["Task Orchestration", "Formatting Errors", "Language-only", "Incorrect tool args"]
    assert categories["Task Orchestration"].name == "Task orchestration error"  # a topic: the seed's name
    assert categories["Language-only"].name == "Language-only hallucination"
    assert categories["Formatting Errors"].name == "Formatting Errors"  # readable: as the data spells it
    assert categories["Incorrect tool args"].name == "Incorrect tool args"  # no seed category: its own
    assert all(same_category(categories[c].name, c) for c in data.labels)  # measured against the same labels


@pytest.mark.slow  # trains label models on both GAIA halves: the whole command runs it
def test_the_label_model_transfers_across_trace_disjoint_halves_with_calibrated_confidence(gaia):
    store = open_store(gaia["stores"]["both"])
    data = load_insight_vectors(store, find_embedding_set(store, model=DEFAULT_MODEL, normalise="none"))
    truth = _truth(store)
    sides = [[k for k, i in enumerate(data.ids) if half(truth[i][1]) == h] for h in (0, 1)]
    for train, test in ((0, 1), (1, 0)):
        tr, te = sides[train], sides[test]
        model = LabelModel().fit(data.vectors[tr], [data.texts[k] for k in tr], [truth[data.ids[k]][0] for k in tr])
        proba = model.predict_proba(data.vectors[te], [data.texts[k] for k in te])
        assert np.allclose(proba.sum(axis=1), 1.0) and 0.1 <= model.temperature_ <= 10
        predicted = model.classes_[proba.argmax(axis=1)]
        right = predicted == np.array([truth[data.ids[k]][0] for k in te], dtype=object)
        assert right.mean() >= 0.45  # measured 0.52-0.55 (docs/quality.md); nearest prototypes ~0.43
        confident = proba.max(axis=1)
        # calibrated: the confident are right more often, and the stated confidence is near the hit rate
        assert right[confident >= 0.5].mean() > right[confident < 0.3].mean() + 0.3
        assert abs(confident.mean() - right.mean()) < 0.15


def test_build_with_examples_learns_the_scheme_and_never_stores_the_examples(gaia, tmp_path):
    store = _copy(gaia, "half1", tmp_path)
    n_insights = store.query("SELECT count(*) FROM insights")[0][0]
    base = dict(clustering_ids=["cl-half1"], seed_taxonomy=load_seed("trail"))
    plain = build(store, BuildParams(**base))
    learned = build(store, BuildParams(**base, examples=[str(gaia["files"][0])]))
    assert store.query("SELECT count(*) FROM insights")[0][0] == n_insights  # examples train, never stored
    names = {t.name for t in learned.types if t.origin == "seed"}
    assert {"Formatting Errors", "Instruction Non-compliance", "Goal Deviation"} <= names  # spelled as the data
    assert "Formatting error" not in names
    (report,) = learned.seed_reports
    assert report.method == "learned" and report.threshold == 0.2 and report.n_training_rows > 250
    quality = evaluate_taxonomy(store, learned.id)
    before = evaluate_taxonomy(store, plain.id)
    assert quality["seed_accuracy"]["unit"] == "distinct statements (insights)"
    assert quality["seed_accuracy"]["accuracy"] >= 0.5 > before["seed_accuracy"]["accuracy"]
    assert quality["labels"]["ari"] > before["labels"]["ari"] + 0.05
    notes = json.loads(store.query("SELECT summary FROM stage_runs WHERE id = ?",
                                   [f"taxonomy.build:{learned.id}"])[0][0])
    assert notes["learned"]["other"]["rows_by_source"]["examples"] > 250
    again = build(store, BuildParams(**base, examples=[str(gaia["files"][0])]))
    assert again.id == learned.id  # same examples, same labels: the same snapshot


def test_examples_without_labels_or_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "examples.csv"
    bad.write_text("text,label\nThe agent looped,Resource Abuse\nThe tool call had no closing tag,\n")
    with pytest.raises(InputError, match=r"examples.csv:3 field 'text'.*needs a label"):
        read_examples([bad])
    with pytest.raises(InputError, match="no such file"):
        read_examples([tmp_path / "missing.jsonl"])


def test_labels_follow_the_content_across_rebuilds_and_re_ingests(gaia, tmp_path):
    store = _copy(gaia, "half1", tmp_path)
    params = BuildParams(clustering_ids=["cl-half1"], seed_taxonomy=load_seed("trail"))
    first = build(store, params)
    iid, text = store.query("SELECT id, text FROM insights ORDER BY id LIMIT 1")[0]
    smallest = first.types[-1]
    assert label_type(store, smallest.id, "Timeout Issues") == smallest.n_insights  # one label per statement
    assert label_insights(store, [iid], "  GPU   driver crash ") == 1  # a new category, whitespace collapsed
    rebuilt = build(store, params)
    assert rebuilt.id != first.id  # the labels are part of what the snapshot learned from
    assigned = store.query("SELECT t.name FROM insight_failure_types a JOIN failure_types t ON t.taxonomy_id ="
                           " a.taxonomy_id AND t.id = a.failure_type_id WHERE a.taxonomy_id = ? AND a.insight_id = ?",
                           [rebuilt.id, iid])
    assert assigned == [("GPU driver crash",)]  # a labelled insight goes to its label's category
    run_file(store, FileIngestParams(paths=[gaia["files"][1]]))  # ingest re-run: nothing new, labels kept
    assert {r.label for r in list_labels(store)} >= {"GPU driver crash"}
    assert store.query("SELECT text FROM insight_labels WHERE label = 'GPU driver crash'") == [(text,)]
    assert build(store, params).id == rebuilt.id
    with pytest.raises(NotFoundError, match="no insight 'nope'"):
        label_insights(store, ["nope"], "x")
    assert remove_labels(store, insight_ids=[iid]) == 1
    assert build(store, params).id != rebuilt.id


@pytest.mark.parametrize(
    ("bad_row", "message"),
    [
        ("The agent looped,", r"labels.csv:3 field 'label': missing label"),
        ("The agent looped,\x07bell", r"labels.csv:3 field 'label'.*control characters"),
        ("The agent looped," + "x" * 201, r"labels.csv:3 field 'label'.*at most 200"),
    ],
)
def test_bad_label_files_name_file_line_and_field_and_write_nothing(store, tmp_path, bad_row, message):
    path = tmp_path / "labels.csv"
    path.write_text(f"text,label\nA fine statement,Fine label\n{bad_row}\n")
    with pytest.raises(InputError, match=message):
        label_file(store, path)
    assert list_labels(store) == []  # all or nothing
    path.write_text("text,label\n")
    with pytest.raises(InputError, match="no labelled rows"):
        label_file(store, path)


def test_label_file_and_hostile_labels(store, tmp_path):
    path = tmp_path / "labels.jsonl"
    rows = [{"text": "The agent printed the answer as prose", "label": "[bold]Formatting[/] Errors"},
            {"text": "The agent printed the answer as prose", "label": "Formatting Errors"},
            {"text": "The agent quoted a <script>alert(1)</script> tag", "label": "[red]Markup[/]"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert label_file(store, path, unmatched="keep").n_labelled == 2  # the same text twice: one label, the last
    labels = {r.text: r.label for r in list_labels(store)}
    assert labels["The agent printed the answer as prose"] == "Formatting Errors"
    assert labels["The agent quoted a <script>alert(1)</script> tag"] == "[red]Markup[/]"  # stored as written
    with pytest.raises(InputError, match="surrogates"):
        label_insights(store, [], "bad \udcff label")


@pytest.mark.slow  # trains label models on both GAIA halves: the whole command runs it
def test_cli_label_then_quality_reports_accuracy_in_distinct_statements(gaia, tmp_path, monkeypatch):
    from failatlas.cli import app

    monkeypatch.setenv("FAILATLAS_NO_PROGRESS", "1")
    monkeypatch.setenv("COLUMNS", "300")  # wide tables: a figure's name and unit on one line
    store = _copy(gaia, "half1", tmp_path)
    truth = _truth(store)
    db = str(tmp_path / "half1.duckdb")
    runner = CliRunner()
    picked = sorted(truth)[:12]
    for iid in picked:
        result = runner.invoke(app, ["--db", db, "label", "add", iid, "--as", truth[iid][0]])
        assert result.exit_code == 0, result.output
    listed = runner.invoke(app, ["--db", db, "label", "list"])
    assert "12 labelled distinct statement(s)" in listed.output
    built = runner.invoke(app, ["--db", db, "taxonomy", "build", "-c", "cl-half1", "--seed", "trail"])
    assert built.exit_code == 0, built.output
    assert "learned assignment other:" in built.output and "distinct statements" in built.output
    shown = runner.invoke(app, ["--db", db, "taxonomy", "show", "--quality"])
    assert shown.exit_code == 0, shown.output
    out = " ".join(shown.output.split())
    assert "seed assignment accuracy" in out and "your labels, cross-validated accuracy" in out
    assert "5-fold over 12 labelled distinct statements" in out
    assert "per category, imported labels (distinct statements)" in out
    help_text = " ".join(runner.invoke(app, ["taxonomy", "build", "--help"]).output.replace("│", " ").split())
    assert "ground truth for evaluation and never train, unless you pass that file here" in help_text

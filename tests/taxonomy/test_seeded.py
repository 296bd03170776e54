"""Seeded taxonomies: the seed files, the calibrated threshold, seed and new types, coverage, and the quality
report (name fidelity, ARI against TRAIL's human labels) on a real store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.core.errors import ConfigError, InputError
from failatlas.taxonomy import run as build
from failatlas.taxonomy.evaluate import evaluate_taxonomy
from failatlas.taxonomy.seeding import (
    assign_to_seed,
    builtin_seeds,
    calibrate_threshold,
    load_seed,
    prototypes,
)
from tests.taxonomy.conftest import TRAIL_PARAMS
from tests.taxonomy.fill import TEST_EMBED_MODEL


class TrailSpaceEmbedder:
    """The test store's own TF-IDF/SVD space as an embedder (a fake for the sentence-transformers model, named
    as the test embedding set's model so that the build accepts it)."""

    model = TEST_EMBED_MODEL
    revision = "test"

    def __init__(self, embed) -> None:
        self.embed = embed
        self.calls = 0

    def encode(self, texts, batch_size: int = 64) -> np.ndarray:
        self.calls += 1
        return np.asarray(self.embed(list(texts)), dtype=np.float32)


def test_shipped_seeds_load_and_trail_has_its_20_leaf_categories(shared_data: Path):
    assert {"trail", "expbench"} <= set(builtin_seeds())
    trail = load_seed("trail")
    cats = trail.categories_for("execution")  # '*': any phase
    assert len(cats) == 20 and all(c.definition and c.parent for c in cats)
    readme = (shared_data / "trail" / "README.md").read_text()
    rows = [json.loads(line) for line in (shared_data / "trail" / "trail_errors_gaia.jsonl").read_text().splitlines()]
    # every GAIA label has a seed category of that name (singular/plural and 'hallucination' aside)
    names = {c.name.lower() for c in cats}
    for label in {r["category"] for r in rows}:
        stem = label.lower().rstrip("s").replace(" issue", "").replace(" error", "")
        assert any(stem.split()[0] in n for n in names), label
    assert "Formatting Errors" in readme
    expbench = load_seed("expbench")
    assert set(expbench.phases) == {"design", "implementation", "execution", "conclusion"}
    assert expbench.categories_for("monitor") == []  # no category for a phase the seed does not cover
    assert "Missing essential implementation components" in {c.name for c in expbench.phases["implementation"]}


@pytest.mark.parametrize(
    ("body", "suffix", "message"),
    [
        ("name: x\nphases:\n  design:\n    - name: A\n", ".yaml", "field 'phases.design.0.definition'"),
        ("name: x\nphases: {design: [{name: A, definition: d}, {name: a, definition: e}]}\n", ".yaml", "twice"),
        ("name: x\nphases:\n  design: [\n", ".yaml", "not valid YAML"),
        ('{"name": "x", "phases": {"design": []}}', ".json", "lists no category"),
        ('{"name": "x", "phases": {"design": [{"name": "A", "definition": "d", "colour": 1}]}}', ".json", "colour"),
        ("- just a list\n", ".yml", "top level must be a mapping"),
    ],
)
def test_bad_seed_files_name_the_file_and_field(tmp_path, body, suffix, message):
    path = tmp_path / f"seed{suffix}"
    path.write_text(body)
    with pytest.raises(InputError, match=message) as err:
        load_seed(path)
    assert str(path) in str(err.value)
    with pytest.raises(InputError, match="does not exist"):
        load_seed(tmp_path / "missing.yaml")


def test_threshold_is_a_quantile_of_the_mismatched_cosines():
    sims = np.array([[0.9, 0.1, 0.2], [0.3, 0.8, 0.0], [0.5, 0.4, 0.45]])
    mismatched = [0.1, 0.2, 0.3, 0.0, 0.4, 0.45]
    assert calibrate_threshold(sims, 0.5) == pytest.approx(np.quantile(mismatched, 0.5))
    assert calibrate_threshold(sims[:, :1], 0.8) == -1.0  # one category: nothing to contrast
    # a scaled cosine scale moves the threshold with it: calibrated, not a fixed number
    assert calibrate_threshold(sims * 0.5, 0.5) == pytest.approx(0.5 * np.quantile(mismatched, 0.5))
    vectors = np.eye(3, dtype=np.float32)
    labels, score = assign_to_seed(vectors, np.eye(3, dtype=np.float32)[:2], 0.5)
    assert labels.tolist() == [0, 1, -1] and score[:2].tolist() == [1.0, 1.0]


def test_seeded_build_maps_onto_the_seed_marks_new_types_and_reports_coverage(trail_store, trail_template):
    embedder = TrailSpaceEmbedder(trail_template.embed)
    seed = load_seed("trail")
    params = TRAIL_PARAMS.model_copy(update={"seed_taxonomy": seed})
    tax = build(trail_store, params, embedder=embedder)
    assert embedder.calls >= 1
    (report,) = tax.seed_reports
    seed_types = [t for t in tax.types if t.origin == "seed"]
    new_types = [t for t in tax.types if t.origin == "new"]
    assert seed_types and new_types and all(t.origin in ("seed", "new") for t in tax.types)
    assert {t.name for t in seed_types} <= {c.name for c in seed.categories_for("execution")}
    assert all(t.naming_method == "seed" and "e.g." in t.definition for t in seed_types)
    assert all(len({m for m in t.merged_from}) >= 1 and t.n_insights >= 2 for t in new_types)
    # the reported threshold is the calibration recomputed from the same vectors and prototypes
    vectors = trail_template.embed(trail_template.texts)
    protos = prototypes(seed.categories_for("execution"), embedder.encode)
    order = np.argsort(trail_template.insight_ids)  # the clustering's members are read in insight-id order
    expected = calibrate_threshold(vectors[order] @ protos.T, params.seed_null_quantile)
    assert report.threshold == pytest.approx(expected, abs=1e-4)
    # coverage = the share of the clustering's insights that sit in seed types
    in_seed = trail_store.query(
        "SELECT count(*) FROM insight_failure_types a JOIN failure_types t ON t.taxonomy_id = a.taxonomy_id"
        " AND t.id = a.failure_type_id WHERE a.taxonomy_id = ? AND t.origin = 'seed' AND a.method = 'cluster'",
        [tax.id],
    )[0][0]
    assert report.n_explained == in_seed and report.n_insights == len(trail_template.insight_ids)
    assert 0 < report.coverage < 1
    # categories: seed types sharing a parent, two or more each
    for c in tax.categories:
        assert sum(t.category_id == c.id for t in tax.types) >= 2
    # the snapshot reads back with its origins and report
    from failatlas.taxonomy import load_taxonomy

    again = load_taxonomy(trail_store, tax.id)
    assert [t.origin for t in again.types] == [t.origin for t in tax.types]
    assert again.seed_reports == tax.seed_reports


def test_quality_report_scores_names_and_labels(trail_store, trail_template):
    embedder = TrailSpaceEmbedder(trail_template.embed)
    tax = build(trail_store, TRAIL_PARAMS)
    quality = evaluate_taxonomy(trail_store, tax.id, embedder=embedder)
    assert 0.0 <= quality["name_fidelity"] <= 1.0 and quality["fidelity_items"] > 400
    assert set(quality["fidelity_by_type"]) <= {t.id for t in tax.types}
    labels = quality["labels"]
    assert labels["n_labels"] == 19 and 0.0 < labels["ari"] < 1.0 and labels["nmi"] > 0.1
    assert set(labels["per_label_recall"]) == set(labels["label_sizes"])
    with pytest.raises(ConfigError):
        evaluate_taxonomy(trail_store, tax.id, labels="text; DROP TABLE insights", embedder=embedder)


def test_cli_build_with_a_seed_file_prints_coverage_and_quality(trail_store, trail_template, tmp_path, monkeypatch):
    import failatlas.embed as embed

    monkeypatch.setattr(embed, "get_embedder", lambda model, **kw: TrailSpaceEmbedder(trail_template.embed))
    seed_file = tmp_path / "mine.json"
    seed_file.write_text(json.dumps({"name": "two kinds", "phases": {"execution": [
        {"name": "Tool called with wrong arguments",
         "definition": "A tool call passes arguments the tool does not take.", "parent": "Tools"},
        {"name": "Plan tag missing", "definition": "The plan does not end with the end_plan tag it must end with.",
         "parent": "Tools"},
    ]}}))
    runner = CliRunner()
    db = str(trail_store.path)
    result = runner.invoke(app, ["--db", db, "taxonomy", "build", "--clustering", "cl-trail-kmeans20",
                                 "--seed", str(seed_file), "--seed-quantile", "0.9"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "seed coverage execution:" in result.output and "new type(s)" in result.output
    shown = runner.invoke(app, ["--db", db, "taxonomy", "show", "--quality"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "name fidelity" in shown.output and "seed coverage (execution)" in shown.output and "ari" in shown.output
    bad = runner.invoke(app, ["--db", db, "taxonomy", "build", "--seed", str(tmp_path / "nope.yaml")])
    assert bad.exit_code != 0 and isinstance(bad.exception, InputError)

"""`failatlas taxonomy build / list / show / assign / export` through typer's CliRunner on a filled store."""

from __future__ import annotations

from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.core.errors import NotFoundError
from failatlas.store import Store
from failatlas.taxonomy import load_taxonomy
from tests.taxonomy.conftest import TRAIL_CLUSTERING


def _run(db, *args):
    result = CliRunner().invoke(app, ["--db", str(db), "taxonomy", *args], env={"COLUMNS": "200"})
    return result


def test_build_list_show_assign_export(mini_store, tmp_path):
    db = mini_store.path
    built = _run(db, "build")
    assert built.exit_code == 0, built.output
    assert "6 failure types" in built.output and "1 unassigned" in built.output
    tax_id = mini_store.query("SELECT id FROM taxonomies")[0][0]

    listed = _run(db, "list")
    assert listed.exit_code == 0 and tax_id in listed.output

    shown = _run(db, "show", "1", "--by", "agent", "--definitions")
    assert shown.exit_code == 0, shown.output
    assert "react-agent" in shown.output and "openhands" in shown.output and "Unassigned" in shown.output
    runs = _run(db, "show", tax_id, "--unit", "runs")
    assert runs.exit_code == 0 and "unit: runs" in runs.output

    assigned = _run(db, "assign")
    assert assigned.exit_code == 0 and "no new insights" in assigned.output

    out = tmp_path / "paper"
    exported = _run(db, "export", "--out", str(out))
    assert exported.exit_code == 0, exported.output
    for name in (
        "prevalence.tex",
        "prevalence.md",
        "prevalence.csv",
        "failure_types.md",
        "prevalence_by_phase.pdf",
        "agent_heatmap.png",
        "funnel.pdf",
    ):
        assert (out / name).stat().st_size > 0, name


def test_cli_on_trail_with_options_and_errors(trail_store, tmp_path):
    db = trail_store.path
    built = _run(
        db,
        "build",
        "--clustering",
        TRAIL_CLUSTERING,
        "--merge-threshold",
        "0.75",
        "--assign-threshold",
        "0.5",
        "--max-categories",
        "4",
    )
    assert built.exit_code == 0, built.output
    # 20 clusters, the planted pair merged (19), and types whose insights name different exceptions split
    tax = load_taxonomy(Store(db))
    assert f"{len(tax.types)} failure types in {len(tax.categories)} categories" in built.output
    assert len(tax.types) > 19 and 2 <= len(tax.categories) <= 4
    assert all(sum(t.category_id == c.id for t in tax.types) >= 2 for c in tax.categories)
    out = tmp_path / "out"
    exported = _run(db, "export", "v1", "--out", str(out), "--formats", "csv,png")
    assert exported.exit_code == 0 and "skipped funnel" in exported.output
    # the agent heatmap is export's to write or skip (issue 20); the table and the phase figure are always there
    assert {"prevalence.csv", "prevalence_by_phase.png"} <= {p.name for p in out.iterdir()}
    missing = _run(db, "show", "tx-missing")
    assert isinstance(missing.exception, NotFoundError)
    help_text = CliRunner().invoke(app, ["taxonomy", "--help"]).output
    assert all(cmd in help_text for cmd in ("build", "list", "show", "assign", "export"))


def test_build_says_what_fit_definitions_did(trail_store):
    plain = _run(trail_store.path, "build", "--clustering", TRAIL_CLUSTERING)
    assert plain.exit_code == 0 and "definitions" not in plain.output.split("categories;")[-1]
    # the test vectors' model is on no machine: the build says so instead of fitting silently nothing
    fitted = _run(trail_store.path, "build", "--clustering", TRAIL_CLUSTERING, "--fit-definitions")
    assert fitted.exit_code == 0, fitted.output
    assert "definitions not fitted" in fitted.output and "tfidf-svd-64" in fitted.output


def test_the_fit_report_prints_a_model_name_as_text_not_markup(trail_store):
    # a model name is whatever `embed run --model` was given: Rich markup in it must neither vanish nor crash
    with trail_store.write() as conn:
        conn.execute("UPDATE embedding_sets SET model = 'svd[/bold][red]-64'")
    fitted = _run(trail_store.path, "build", "--clustering", TRAIL_CLUSTERING, "--fit-definitions")
    assert fitted.exit_code == 0, fitted.output
    assert "svd[/bold][red]-64" in fitted.output


def test_quality_says_what_it_compared_without_a_seed():
    """Issue 42: an unsupervised build's `taxonomy show --quality` said "no labels to compare with" beside an
    ARI computed from those labels."""
    from failatlas.taxonomy.cli import _no_seed_accuracy

    said = _no_seed_accuracy(False, {"n_items": 12, "column": "label"})
    assert "without --seed" in said and "12 distinct statements" in said and "insight_sources.label" in said
    assert "no labels" not in said
    assert "no labels to compare the types with" in _no_seed_accuracy(False, None)
    assert _no_seed_accuracy(True, None).startswith("no labels to compare with")

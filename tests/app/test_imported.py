"""The explorer on imported data (TRAIL's GAIA annotations, no run stored): the source record behind an insight,
the Overview saying what the store holds, the Map coloured by the annotators' labels, and exports of the view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failatlas.appdata import queries
from failatlas.store import Store, open_store
from tests.app.fixture import fill_trail_store
from tests.app.test_pages import plain, render, texts


@pytest.fixture(scope="module")
def trail_template(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("trail-app") / "trail.duckdb"
    return db, fill_trail_store(open_store(db), shared_data / "trail" / "trail_errors_gaia.jsonl")


def test_an_imported_insight_shows_its_source_record(trail_template: tuple[Path, str], shared_data: Path) -> None:
    db, _ = trail_template
    store = Store(db)
    (insight_id, line) = store.query(
        "SELECT insight_id, source_line FROM insight_sources ORDER BY source_line LIMIT 1 OFFSET 7")[0]
    record = json.loads((shared_data / "trail" / "trail_errors_gaia.jsonl").read_text().splitlines()[line - 1])
    (shown,) = [r for r in queries.insight_records(store, insight_id) if r["source_line"] == line]
    assert shown["trace_id"] == record["trace_id"] and shown["label"] == record["category"]
    assert shown["record"]["evidence"] == record["evidence"]  # the annotated span, as the file holds it
    assert shown["detail"]["location"] == record["location"]


def test_source_records_from_annotation_files_and_missing_ones(tmp_path: Path) -> None:
    doc = {"trace_id": "t-9", "errors": [{"category": "A", "evidence": "e0"}, {"category": "B", "evidence": "e1"}]}
    path = tmp_path / "t-9.json"
    path.write_text(json.dumps(doc))
    record = queries.source_record(str(path), None, "errors[1].description")
    assert record == {"trace_id": "t-9", "category": "B", "evidence": "e1"}
    assert queries.source_record(str(path), None, "errors[5].description") is None
    assert queries.source_record(str(tmp_path / "gone.jsonl"), 3, "description") is None
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"a": 1}\nnot json\n{"b": 2}\n')
    assert queries.source_record(str(lines), 3, "description") == {"b": 2}
    assert queries.source_record(str(lines), 2, "description") is None  # changed since import: not shown as data
    assert queries.source_record(str(lines), 9, "description") is None


def test_pages_on_imported_data(trail_template: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    db, taxonomy_id = trail_template
    at = render(db, monkeypatch)
    shown = texts(at)
    assert "No runs yet" not in shown and "insights imported from files" in shown
    assert at.dataframe[0].value["origin"].tolist() == ["trail"]
    at.button(key="overview_go_map").click().run()
    assert at.query_params["page"] == "map" and at.query_params["colour"] == "label"
    assert at.radio(key="map_colour").value == "label"
    at = render(db, monkeypatch, page="taxonomy")
    at.radio(key="tx_unit").set_value("share of runs").run()
    assert "no share of runs to show" in texts(at) and "--unit" not in texts(at)
    (insight_id,) = Store(db).query("SELECT insight_id FROM insight_failure_types WHERE taxonomy_id = ? "
                                    "ORDER BY insight_id LIMIT 1", [taxonomy_id])[0]
    at = render(db, monkeypatch, page="drill", taxonomy=taxonomy_id, insight=insight_id)
    shown = texts(at)
    assert "Source record" in shown and "human label" in shown and "No stored run" not in shown
    assert not [b for b in at.button if b.key.startswith("open_run_")]


def test_exports_of_imported_data_leave_out_meaningless_figures(trail_template: tuple[Path, str],
                                                              tmp_path: Path) -> None:
    from failatlas.taxonomy import export_taxonomy

    db, taxonomy_id = trail_template
    result = export_taxonomy(Store(db), taxonomy_id, tmp_path)
    names = {Path(p).name for p in result.written}
    assert "agent_heatmap.png" not in names and "agent_heatmap" in result.skipped  # one "(unknown)" agent
    assert "funnel" in result.skipped and "prevalence_by_phase.pdf" in names


def test_the_current_view_exports_as_a_paper_table_and_figure(trail_template: tuple[Path, str],
                                                             tmp_path: Path) -> None:
    from tests.paper_latex import compile_latex, header_packages

    db, taxonomy_id = trail_template
    frame = queries.prevalence_frame(Store(db), taxonomy_id, dimension="benchmark", value="trail-gaia")
    files = queries.view_files(frame, "insights, benchmark trail-gaia")
    assert sorted(files) == [f"view-insights-benchmark-trail-gaia.{s}" for s in ("csv", "md", "pdf", "png", "tex")]
    csv_rows = files["view-insights-benchmark-trail-gaia.csv"].decode().strip().splitlines()
    assert len(csv_rows) == frame.height + 1
    tex = tmp_path / "view.tex"
    tex.write_bytes(files["view-insights-benchmark-trail-gaia.tex"])
    compile_latex(tex, tmp_path, header_packages(tex))
    assert plain("x") == "x"


@pytest.fixture(scope="module")
def embedded_trail(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> tuple[Path, str]:
    """TRAIL imported and embedded by the real stages (all-MiniLM-L6-v2 from its package, offline), clustered by
    k-means over those vectors, the taxonomy built on them."""
    import numpy as np
    from sklearn.cluster import KMeans

    from failatlas.embed import EmbedParams, load_insight_vectors
    from failatlas.embed import run as embed
    from failatlas.ingest import FileIngestParams, run_file
    from failatlas.taxonomy import BuildParams
    from failatlas.taxonomy import run as build
    from tests.taxonomy.fill import add_clustering

    db = tmp_path_factory.mktemp("trail-embedded") / "trail.duckdb"
    store = open_store(db)
    run_file(store, FileIngestParams(paths=[shared_data / "trail" / "trail_errors_gaia.jsonl"], format="trail"))
    embedded = embed(store, EmbedParams())
    data = load_insight_vectors(store, embedded.embedding_set_id)
    labels = KMeans(10, random_state=0, n_init=3).fit_predict(np.asarray(data.vectors))
    add_clustering(store, "cl-semantic", "other", data.ids, labels, model=data.embedding_set.model,
                   embedding_set_id=embedded.embedding_set_id)
    return db, build(store, BuildParams(clustering_ids=["cl-semantic"])).id


@pytest.mark.slow  # embeds 502 texts with the real model
def test_search_by_meaning_finds_what_words_do_not(embedded_trail: tuple[Path, str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    db, taxonomy_id = embedded_trail
    store = Store(db)
    query = "made up the outcome of a web lookup it never performed"
    assert queries.search_insights(store, query, taxonomy_id)[1] == 0  # no insight holds these words
    hits = queries.semantic_search(store, query, taxonomy_id, limit=5)
    assert hits.height == 5 and sum("search" in t.lower() for t in hits["text"]) >= 3
    assert hits["similarity"].is_sorted(descending=True)
    (text,) = store.query("SELECT text FROM insights ORDER BY id LIMIT 1")[0]
    itself = queries.semantic_search(store, text, taxonomy_id, limit=1)
    assert itself["text"][0] == text and itself["similarity"][0] > 0.999
    at = render(db, monkeypatch, page="drill", taxonomy=taxonomy_id, search=query, mode="meaning")
    assert "closest in meaning" in texts(at)
    assert any(d.value["text"].tolist()[:5] == hits["text"].to_list() for d in at.dataframe if "text" in d.value)


def test_search_by_meaning_says_why_it_cannot(trail_template: tuple[Path, str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture's vectors come from no model on this machine: the page says so instead of failing."""
    db, taxonomy_id = trail_template
    at = render(db, monkeypatch, page="drill", taxonomy=taxonomy_id, search="web search", mode="meaning")
    assert "Search by meaning is not available" in texts(at)

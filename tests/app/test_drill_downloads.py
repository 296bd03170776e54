"""The Drill-down page (issue 54): a failure type's drill-down downloads as the files `failatlas taxonomy export
--type` writes, and an entry point lists the runs of the agents it is about before the reference agents' (a null
run, which leaves everything unimplemented, came first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from failatlas.appdata import queries
from failatlas.store import Store
from failatlas.taxonomy.drilldown import drilldown_files
from tests.app.fixture import with_kinds
from tests.app.test_pages import render

ENTRY = "environment / dependency misconfiguration"


def test_the_drill_down_page_downloads_the_types_drilldown(app_db: Path, taxonomy_id: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    type_id = "implementation/T01"
    at = render(app_db, monkeypatch, page="drill", taxonomy=taxonomy_id, failure_type=type_id)
    assert not at.get("download_button")  # prepared on request only
    at.checkbox(key=f"drill_download_{type_id}").check().run()
    assert not at.exception
    buttons = at.get("download_button")
    files = drilldown_files(Store(app_db), type_id, taxonomy_id)
    assert [b.proto.label for b in buttons] == [f"Download {name}" for name in files]
    assert queries_files(app_db, taxonomy_id, type_id) == files


def queries_files(db: Path, taxonomy_id: str, type_id: str) -> dict[str, bytes]:
    """What the page's buttons serve: its cached query, called as the page calls it."""
    from failatlas.appdata.cache import q

    return q(str(db), "drilldown_files", taxonomy_id, type_id)


def test_an_entry_point_lists_the_runs_it_is_about_first(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taxonomy_id = with_kinds(app_db)
    store = Store(app_db)
    types = tuple(queries.entry_point_types(store, taxonomy_id, ENTRY)["failure_type_id"].to_list())
    runs = queries.type_runs(store, taxonomy_id, types, per_type=10)
    type_id = next(t for t in types if runs.filter(runs["failure_type_id"] == t).height >= 2)
    first = runs.filter(runs["failure_type_id"] == type_id)["run_id"][0]
    with store.write() as conn:  # the run listed first becomes the null agent's: it must now come after the others
        conn.execute("UPDATE runs SET agent = 'null' WHERE id = ?", [first])
    ordered = queries.type_runs(store, taxonomy_id, (type_id,), per_type=10)
    assert ordered["agent"].to_list()[-1] == "null" and ordered["run_id"].to_list()[-1] == first
    assert "null" not in ordered["agent"].to_list()[:-1]
    at = render(app_db, monkeypatch, page="drill", taxonomy=taxonomy_id, entry=ENTRY)
    shown = [b.key.removeprefix(f"entry_run_{type_id}_") for b in at.button
             if b.key.startswith(f"entry_run_{type_id}_")]
    assert shown and first not in shown[:-1]  # two buttons per type: the null run never before another agent's

"""The explorer's queries on the fixture store: the numbers are those of the stages' own functions."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from failatlas.appdata import queries
from failatlas.store import Store, open_store
from failatlas.taxonomy import export_taxonomy, prevalence
from tests.app.fixture import DIFF, QUESTION, STDERR, with_kinds
from tests.taxonomy.mini import INSIGHTS


def test_prevalence_is_the_taxonomy_query(app_db: Path, taxonomy_id: str) -> None:
    store = Store(app_db)
    for unit in ("insights", "runs"):
        expected = prevalence(store, taxonomy_id, unit=unit)
        assert queries.prevalence_frame(store, taxonomy_id, unit=unit).equals(expected)
        by_agent = prevalence(store, taxonomy_id, unit=unit, by="agent")
        got = queries.prevalence_frame(store, taxonomy_id, unit=unit, dimension="agent", value="openhands")
        assert got.height > 0
        assert got.equals(by_agent.filter(pl.col("group") == "openhands"))


def test_paper_filter_counts_occurrences_of_that_papers_tasks(app_db: Path, taxonomy_id: str) -> None:
    # The fixture puts tasks t1 and t2 in paper-A: runs r1, r2, o1, o2 (run rN / oN works on task tN).
    expected: dict[str, int] = {}
    for phase, types in INSIGHTS.items():
        expected[phase] = sum(1 for items in types.values() for _, run in items if run[1] in "12")
    got = queries.prevalence_frame(Store(app_db), taxonomy_id, dimension="paper", value="paper-A")
    totals = dict(got.select("phase", "total").unique().iter_rows())
    assert totals == expected
    assert got.group_by("phase").agg(pl.col("share").sum())["share"].to_list() == pytest.approx([1.0] * 3)
    assert got["ci_low"].null_count() == got.height


def test_exports_are_the_cli_exports_byte_for_byte(app_db: Path, taxonomy_id: str, tmp_path: Path) -> None:
    store = Store(app_db)
    files = queries.export_files(store, taxonomy_id)
    assert set(files) == {"prevalence.tex", "prevalence.md", "prevalence.csv", "failure_types.md"}
    export_taxonomy(store, taxonomy_id, tmp_path, formats=("tex", "md", "csv"))
    for name, data in files.items():
        assert data == (tmp_path / name).read_bytes()


def test_type_insights_paginate_and_search(app_db: Path, taxonomy_id: str) -> None:
    store = Store(app_db)
    first, total = queries.type_insights(store, taxonomy_id, "implementation/T01", limit=2)
    second, total2 = queries.type_insights(store, taxonomy_id, "implementation/T01", limit=2, offset=2)
    assert total == total2 == 4
    assert first.height == 2 and second.height == 2
    assert not set(first["insight_id"]) & set(second["insight_id"])
    found, n = queries.type_insights(store, taxonomy_id, "implementation/T01", search="SCIPY")
    assert n == 1 and "scipy" in found["text"][0]
    none, n = queries.type_insights(store, taxonomy_id, "implementation/T01", search="%' OR 1=1 --")
    assert n == 0 and none.height == 0


def test_search_over_insight_text_names_the_failure_type(app_db: Path, taxonomy_id: str) -> None:
    hits, total = queries.search_insights(Store(app_db), "torchvision", taxonomy_id)
    assert total == 1
    assert hits["failure_type_id"][0] == "implementation/T01"


def test_run_detail_has_everything_a_drill_down_shows(app_db: Path) -> None:
    detail = queries.run_detail(Store(app_db), "r1")
    assert detail["task"]["question"] == QUESTION
    assert detail["task"]["ground_truth"]["expected_results"][0]["name"] == "accuracy"
    assert detail["diff"] == DIFF
    assert detail["steps"].filter(pl.col("kind") == "tool_call")["tool"].to_list() == ["bash"]
    assert detail["commands"]["stderr_tail"][0] == STDERR
    assert detail["validation"]["outcome"] == "passed"
    assert detail["validation"]["command"] == "cd /work && python train.py"
    assert detail["findings"]["evidence"].to_list() == ["pip download torch"]
    judged = dict(detail["judgements"].select("phase", "error_analysis").iter_rows())
    assert judged["conclusion"] == "The conclusion overstates the gain."
    assert queries.run_detail(Store(app_db), "no-such-run") is None


def test_entry_points_hold_the_types_of_their_kinds(app_db: Path) -> None:
    taxonomy_id = with_kinds(app_db)
    store = Store(app_db)
    env = queries.entry_point_types(store, taxonomy_id, "environment / dependency misconfiguration")
    kinds = dict(store.query("SELECT i.id, i.kind FROM insights i"))
    members = store.query("SELECT failure_type_id, insight_id FROM insight_failure_types WHERE taxonomy_id = ?",
                          [taxonomy_id])
    env_types = set(env["failure_type_id"].to_list())
    env_kinds = set(queries.ENTRY_POINTS["environment / dependency misconfiguration"]["kinds"])
    # every member of a listed type is of an environment kind, and every environment insight is listed
    assert env_types and all(kinds[i] in env_kinds for t, i in members if t in env_types)
    assert all(t in env_types for t, i in members if kinds[i] in env_kinds)
    torchvision = store.query("SELECT id FROM insights WHERE text LIKE '%torchvision%'")[0][0]
    assert next(t for t, i in members if i == torchvision) in env_types
    totals = queries.entry_point_totals(store, taxonomy_id)
    assert totals["environment / dependency misconfiguration"][0] == int(env["n_insights"].sum())
    # the fixture's free text names no missing part: nothing is under the other entry point
    assert queries.entry_point_types(store, taxonomy_id, "missing implementation components").height == 0


def test_map_points_are_the_clusterings_coordinates(app_db: Path, taxonomy_id: str) -> None:
    store = Store(app_db)
    points, total = queries.map_points(store, taxonomy_id, "implementation")
    assert total == points.height == 9  # 8 clustered insights + the outlier
    sample, total = queries.map_points(store, taxonomy_id, "implementation", limit=3)
    assert total == 9 and sample.height == 3
    assert set(sample["insight_id"]) <= set(points["insight_id"])
    stored = dict(store.query("SELECT insight_id, x FROM cluster_assignments WHERE clustering_id = 'cl-mini-impl'"))
    assert all(stored[r["insight_id"]] == r["x"] for r in points.iter_rows(named=True))


def test_compare_puts_two_agents_side_by_side(app_db: Path, taxonomy_id: str) -> None:
    store = Store(app_db)
    frame = queries.compare_frame(store, taxonomy_id, by="agent", left="react-agent", right="openhands")
    by_agent = prevalence(store, taxonomy_id, by="agent")
    react = dict(by_agent.filter(pl.col("group") == "react-agent").select("failure_type_id", "share").iter_rows())
    shown = dict(frame.select("failure_type_id", "left_share").iter_rows())
    assert {k: v for k, v in shown.items() if k in react} == react
    assert all(v == 0.0 for k, v in shown.items() if k not in react)  # a type react never shows: 0 of its total
    assert frame.select("phase", "failure_type_id").is_unique().all()  # one row per type, keyed by id
    from failatlas.taxonomy.prevalence import share_difference

    for r in frame.iter_rows(named=True):
        d, low, high = share_difference(r["left_count"], r["left_total"], r["right_count"], r["right_total"])
        assert (r["difference"], r["difference_low"], r["difference_high"]) == pytest.approx((d, low, high))
        assert r["difference_low"] <= r["difference"] <= r["difference_high"]


def test_status_and_next_steps_for_missing_empty_and_partial_stores(tmp_path: Path, app_db: Path) -> None:
    missing = queries.store_status(Store(tmp_path / "none.duckdb"))
    assert not missing.exists and "No store" in queries.next_steps(missing)[0]
    empty = queries.store_status(open_store(tmp_path / "empty.duckdb"))
    steps = queries.next_steps(empty)
    assert [s.split("`")[1] for s in steps] == ["failatlas bench run", "failatlas bench score",
                                                 "failatlas ingest runs", "failatlas embed run",
                                                 "failatlas cluster run", "failatlas taxonomy build"]
    full = queries.store_status(Store(app_db))
    assert queries.next_steps(full) == []
    assert full.counts["runs"] == 9

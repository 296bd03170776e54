"""The explorer breaks the scores down as `bench report --by` does (issue 32, item 5): the Overview's score table
groups by agent, model, benchmark, paper, setting, task kind or n (AutoExperiment's number of masked functions),
with the same numbers as the report; `bench report` writes several breakdowns' files in one call. The store is
real: tasks of two papers with one and two masked functions, run by gold in two settings and by null, scored."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from failatlas.appdata import queries_groups
from failatlas.bench_core import runs, scoring
from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.cli import app
from failatlas.store import open_store
from tests.app.test_pages import render as _render
from tests.bench_core.tasks.test_selection import _task

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command


@pytest.fixture(scope="module")
def groups_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("groups")
    store = open_store(tmp / "groups.duckdb")
    save_tasks(store, [_task(tmp, "p1", ["predict"]), _task(tmp, "p1", ["predict", "scale"]),
                       _task(tmp, "p2", ["predict"])])
    base = dict(benchmark="toy", sandbox="local", runs_dir=tmp / "runs")
    for setting in ("partial_code", "partial_code+refsol"):
        runs.run(store, runs.BenchParams(agent="gold", agent_params={"execute": False}, setting=setting, **base))
    runs.run(store, runs.BenchParams(agent="null", setting="partial_code", **base))
    scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp / "runs", llm=False))
    return store.path


def _scores(at: AppTest):
    """The phase-score table (the first with an M column after the runs tables)."""
    return next(d.value for d in at.dataframe if "M" in d.value.columns)


def test_overview_groups_the_scores_by_paper_setting_kind_and_n(groups_db: Path, monkeypatch: pytest.MonkeyPatch):
    at = _render(groups_db, monkeypatch)
    choice = at.selectbox(key="overview_group")
    assert choice.options == ["agent", "model", "benchmark", "paper", "setting", "task kind", "n"]
    assert set(_scores(at)["agent"]) == {"gold", "null"}
    at = choice.set_value("paper").run()
    by_paper = _scores(at)
    assert {(r["paper"], r["agent"]): r["runs"] for r in by_paper.to_dict("records")} == {
        ("p1", "gold"): 4, ("p1", "null"): 2, ("p2", "gold"): 2, ("p2", "null"): 1}
    assert at.query_params["group"] == "paper"  # the choice is in the URL, to share the view
    at = _render(groups_db, monkeypatch, group="setting")
    by_setting = {(r["setting"], r["agent"]): r["runs"] for r in _scores(at).to_dict("records")}
    assert by_setting == {("partial_code", "gold"): 3, ("partial_code+refsol", "gold"): 3,
                          ("partial_code", "null"): 3}
    at = at.selectbox(key="overview_group").set_value("n").run()
    by_n = _scores(at)
    assert {(r["n"], r["agent"]): r["runs"] for r in by_n.to_dict("records")} == {
        ("1", "gold"): 4, ("2", "gold"): 2, ("1", "null"): 2, ("2", "null"): 1}
    null_n1 = by_n[(by_n["n"] == "1") & (by_n["agent"] == "null")].iloc[0]
    assert null_n1["E"].startswith("0.00") and null_n1["E"].endswith("n=2")
    at = at.selectbox(key="overview_group").set_value("task kind").run()
    assert set(_scores(at)["task kind"]) == {"masked_functions"}


def test_a_grouping_the_store_cannot_give_is_said(groups_db: Path, monkeypatch: pytest.MonkeyPatch):
    at = _render(groups_db, monkeypatch, group="colour")
    assert any("colour" in w.value and "not available" in w.value for w in at.warning)
    assert "agent" in _scores(at).columns


def test_the_app_numbers_equal_the_report_exports(groups_db: Path, tmp_path: Path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["--db", str(groups_db), "bench", "report", "--by", "paper,setting", "--by",
                                   "agent", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} == {f"report_by_{by}.{ext}" for by in ("paper", "setting", "agent")
                                               for ext in ("md", "csv", "tex")}
    exported = {(r["paper_id"], r["agent"]): r for r in csv.DictReader((out / "report_by_paper.csv").open())}
    from failatlas.store import Store

    shown = queries_groups.score_groups(Store(str(groups_db)), "paper")
    assert shown.height == len(exported) == 4
    for r in shown.iter_rows(named=True):
        row = exported[(r["paper_id"], r["agent"])]
        assert int(row["runs"]) == r["runs"]
        for metric in ("D", "I", "E", "M·C·D·I·E"):
            assert (row[metric] in ("", "nan")) if r[metric] != r[metric] else float(row[metric]) == r[metric]


def test_compare_offers_papers_and_settings_once_the_store_names_them(app_db: Path, taxonomy_id: str,
                                                                      monkeypatch: pytest.MonkeyPatch):
    from failatlas.store import Store
    from failatlas.taxonomy import prevalence

    at = _render(app_db, monkeypatch, page="compare", by="paper", unit="insights")
    assert at.selectbox(key="cmp_by").options == ["agent", "model", "benchmark", "paper"]  # no run has a setting
    assert (at.selectbox(key="cmp_left_paper").value, at.selectbox(key="cmp_right_paper").value) in (
        ("paper-A", "paper-B"), ("paper-B", "paper-A"))
    left = at.selectbox(key="cmp_left_paper").value
    by_paper = prevalence(Store(str(app_db)), taxonomy_id, by="paper")
    expected = by_paper.filter(by_paper["group"] == left)
    shown = [int(c.split()[-1].split("/")[0]) for d in at.dataframe for c in d.value["left"]]  # '50.0 [..] 2/4'
    assert sorted(c for c in shown if c) == sorted(c for c in expected["count"].to_list() if c)
    assert expected["count"].sum() > 0
    with Store(str(app_db)).write() as conn:
        conn.execute("UPDATE runs SET setting = CASE WHEN id IN ('r1', 'r2') THEN 'partial_code'"
                     " ELSE 'full_code' END")
    at = _render(app_db, monkeypatch, page="compare", by="setting", unit="runs")
    assert at.selectbox(key="cmp_by").value == "setting"
    assert set(at.selectbox(key="cmp_left_setting").options) == {"partial_code", "full_code"}
    assert at.dataframe and not at.warning


def test_a_browser_shows_the_scores_grouped_by_paper(groups_db: Path):
    """Real Chromium on the served app: the grouping from the URL is the one chosen and said above the table."""
    from playwright.sync_api import expect

    from tests.app.test_e2e import _page, _serve

    served = _serve(groups_db)
    url = next(served)
    try:
        with _page() as page:
            page.goto(f"{url}/?group=paper", wait_until="networkidle")
            expect(page.get_by_text("grouped by paper as failatlas bench report --by groups them")).to_be_visible(
                timeout=60_000)
            expect(page.get_by_text("Group the scores by")).to_be_visible()
    finally:
        served.close()

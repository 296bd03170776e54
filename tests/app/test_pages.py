"""Every page of the explorer driven through Streamlit's testing API on the fixture store."""

from __future__ import annotations

import html
import re
from pathlib import Path

import polars as pl
import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from failatlas.appdata import queries
from failatlas.appdata.pages.map_view import selected_insight
from failatlas.store import Store, open_store
from failatlas.taxonomy import prevalence
from tests.app.fixture import DIFF, QUESTION, with_kinds
from tests.taxonomy.fill import insight_id

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def render(db: Path, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    monkeypatch.setenv("FAILATLAS_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    """What the page shows as text: its Markdown rendered (the app escapes what it shows from the store, so the
    sources hold backslashes), its plain texts (st.text) and its code blocks."""
    markdown = [m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
    markdown += [w.value for w in at.warning] + [h.value for h in at.subheader]
    return "\n".join([plain(m) for m in markdown] + [t.value for t in at.text] + [c.value for c in at.code])


def plain(markdown: str) -> str:
    """Markdown as the text a reader sees."""
    rendered = MarkdownIt("commonmark").render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).replace("\u2060", "").strip()


def test_overview_shows_runs_scores_funnel_and_cost(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch)
    assert [h.value for h in at.subheader][:3] == [
        "Runs per benchmark, agent and model", "Phase and conjunctive scores", "Funnel: M → M·C·D·I·E"]
    runs = at.dataframe[0].value
    react = runs[runs["agent"] == "react-agent"].iloc[0]
    assert (react["runs"], react["infra_error"], react["completed"]) == (5, 1, 4)
    assert react["cost_usd_total"] == pytest.approx(0.0123)
    every_run = at.dataframe[1].value
    assert len(every_run) == 9 and "?page=drill&run=r1" in set(every_run["open"])
    phases, scores = at.dataframe[2].value, at.dataframe[3].value
    assert list(phases.columns[-5:]) == ["M", "D", "I", "E", "C"]
    assert "M·C·D·I·E" in scores.columns and set(scores["agent"]) == {"react-agent", "openhands"}
    funnel = at.dataframe[4].value  # agent x stage, k/n runs
    # mini.FUNNEL: of react-agent's four scored runs r3 fails M, r1 fails C, r2 fails D
    react = funnel[funnel["agent"] == "react-agent (gpt-4o-mini)"].iloc[0]
    assert [react[s].split("/")[0] for s in ("M", "M·C", "M·C·D", "M·C·D·I", "M·C·D·I·E")] == ["3", "2", "1", "1", "1"]
    assert list(funnel.columns) == ["agent", "M", "M·C", "M·C·D", "M·C·D·I", "M·C·D·I·E"]
    assert "monitor" in every_run.columns  # the monitor's verdict beside the validator's


def test_taxonomy_page_shows_the_prevalence_query_and_switches_units(
        app_db: Path, taxonomy_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch, page="taxonomy")
    expected = prevalence(Store(app_db), taxonomy_id)
    shown = pl.concat([pl.from_pandas(d.value[["failure_type", "share", "count"]]) for d in at.dataframe])
    expected = expected.select("failure_type", pl.col("share") * 100, "count")  # shown in percent
    assert shown.sort("failure_type").equals(expected.sort("failure_type"))
    for (name,) in Store(app_db).query("SELECT name FROM failure_categories WHERE taxonomy_id = ?", [taxonomy_id]):
        assert name in texts(at)  # each category named above its types
    at.radio(key="tx_unit").set_value("share of runs").run()
    runs = prevalence(Store(app_db), taxonomy_id, unit="runs")
    shown = pl.concat([pl.from_pandas(d.value[["failure_type", "share"]]) for d in at.dataframe])
    assert sorted(shown["share"].to_list()) == sorted((100 * runs["share"]).to_list())
    assert at.query_params["unit"] == "runs"  # the view's settings are in the URL
    at.selectbox(key="tx_dim").set_value("agent").run()
    at.selectbox(key="tx_value_agent").set_value("react-agent").run()
    assert not at.exception
    by_agent = prevalence(Store(app_db), taxonomy_id, unit="runs", by="agent").filter(
        pl.col("group") == "react-agent")
    shown = pl.concat([pl.from_pandas(d.value[["failure_type", "count"]]) for d in at.dataframe])
    assert sorted(shown["count"].to_list()) == sorted(by_agent["count"].to_list())
    at.selectbox(key="tx_dim").set_value("paper").run()
    assert "With a paper filter the page shows the share of insights" in texts(at)
    assert at.query_params["by"] == "paper"
    at.checkbox(key="tx_export").check().run()
    assert sorted(b.label for b in at.get("download_button")) == [
        "failure_types.md", "prevalence.csv", "prevalence.md", "prevalence.tex"]


def test_taxonomy_page_opens_a_type_in_the_drill_down(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch, page="taxonomy")
    at.selectbox(key="tx_drill_type").set_value("implementation/T02").run()
    at.button(key="tx_drill_open").click().run()
    assert at.query_params["page"] == "drill" and at.query_params["failure_type"] == "implementation/T02"
    (name,) = Store(app_db).query("SELECT name FROM failure_types WHERE id = 'implementation/T02'")[0]
    assert name in texts(at)


def test_drill_down_from_type_to_insight_to_run(app_db: Path, taxonomy_id: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch, page="drill", taxonomy=taxonomy_id, failure_type="implementation/T01")
    insights = at.dataframe[0].value
    assert len(insights) == 4 and insights["text"].str.contains("torchvision").any()
    assert "No insight selected." in texts(at)
    torch_id = insights[insights["text"].str.contains("torchvision")]["insight_id"].iloc[0]
    # A click on a row sets `insight` in the URL (AppTest cannot click a grid row; the browser test does).
    at = render(app_db, monkeypatch, page="drill", taxonomy=taxonomy_id, failure_type="implementation/T01",
                insight=torch_id)
    run_button = at.button(key="open_run_r1")
    assert plain(run_button.label) == "react-agent · task t1 · validator passed"  # agent, task, outcome
    run_button.click().run()
    assert not at.exception
    assert at.query_params["run"] == "r1"
    shown = texts(at)
    assert QUESTION in shown
    assert [c.value for c in at.code if c.language == "diff"] == [DIFF.rstrip("\n")] or DIFF in shown
    assert "cd /work && python train.py" in shown and "Outcome passed" in shown
    assert "pip download torch" in shown and "The conclusion overstates the gain." in shown
    assert len(at.tabs) == 0  # one section under the other: nothing hides behind a tab
    assert [h.value for h in at.subheader][:5] == [
        "react\\-agent · task t1 · validator passed", "Judges", "Evidence", "Validator", "Diff"]
    # The full traceback of a tool result, not a cell of a table, and a search over the steps.
    assert "ModuleNotFoundError: No module named 'torchvision'" in [c.value for c in at.code]
    at.text_input(key="run_search_r1").input("torchvision").run()
    assert "1 of 3 steps contain" in texts(at)
    at.text_input(key="run_search_r1").input("no such words").run()
    assert "0 of 3 steps contain" in texts(at)
    at.button(key="drill_back").click().run()
    assert "run" not in at.query_params and at.query_params["insight"] == torch_id


def test_drill_down_entry_points_and_search(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taxonomy_id = with_kinds(app_db)
    at = render(app_db, monkeypatch, page="drill", taxonomy=taxonomy_id)
    at.button(key="entry_environment / dependency misconfiguration").click().run()
    assert at.query_params["entry"] == "environment / dependency misconfiguration"
    opened = [b.key for b in at.button if b.key.startswith("entry_open_")]
    env = queries.entry_point_types(Store(app_db), taxonomy_id, "environment / dependency misconfiguration")
    assert opened == [f"entry_open_{t}" for t in env["failure_type_id"]] and opened  # its kinds' types, no other
    at.button(key=opened[0]).click().run()
    assert at.query_params["failure_type"] == opened[0].removeprefix("entry_open_")
    at.button(key="entry_missing implementation components").click().run()
    assert not at.exception and "Missing implementation components" in texts(at)
    at.text_input(key="drill_search").input("learning rate").run()
    assert at.query_params["search"] == "learning rate"  # the search is part of the URL
    found = [d.value for d in at.dataframe if "failure_type" in d.value.columns and "n_occurrences" in d.value]
    assert any(f["text"].str.contains("learning rate").all() and len(f) == 1 for f in found)
    assert "Click a row to open it." in texts(at)


def test_unknown_run_and_insight_say_so(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch, page="drill", run="nope")
    assert "No run nope in the store." in texts(at)
    at = render(app_db, monkeypatch, page="drill", insight="0123456789abcdef")
    assert "No insight 0123456789abcdef in the store." in texts(at)


def test_an_insight_linked_without_its_type_opens(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lr = insight_id("implementation", "The learning rate was set to 10 instead of 1e-3, so training diverged to NaN")
    at = render(app_db, monkeypatch, page="drill", insight=lr)
    assert "learning rate was set to 10" in texts(at)
    assert at.button(key="open_run_o4") is not None


def test_map_page_draws_the_projection(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch, page="map")
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1
    at.selectbox(key="map_phase").set_value("implementation").run()
    assert "9 of 9 distinct insights" in texts(at)


def test_map_selection_names_the_insight() -> None:
    assert selected_insight({"selection": {"pick": [{"insight_id": "abc"}]}}) == "abc"
    assert selected_insight({"selection": {"pick": []}}) is None
    assert selected_insight({"selection": {}}) is None
    assert selected_insight(None) is None


def test_compare_page_puts_agents_side_by_side(app_db: Path, taxonomy_id: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from failatlas.taxonomy.prevalence import share_difference

    at = render(app_db, monkeypatch, page="compare")
    assert at.radio(key="cmp_unit").value == "share of runs"  # the default where runs are stored
    at = render(app_db, monkeypatch, page="compare", unit="insights")
    assert [h.value for h in at.subheader] == ["Design", "Implementation", "Conclusion"]
    at.selectbox(key="cmp_left_agent").set_value("react-agent").run()
    at.selectbox(key="cmp_right_agent").set_value("openhands").run()
    by_agent = prevalence(Store(app_db), taxonomy_id, by="agent")
    react = by_agent.filter(pl.col("group") == "react-agent")
    tables = [d.value for d in at.dataframe]
    shown = [int(c.split()[-1].split("/")[0]) for t in tables for c in t["left"]]  # '50.0 [15.0–85.0] 2/4'
    assert sorted(c for c in shown if c) == sorted(c for c in react["count"].to_list() if c)
    assert at.query_params["left"] == "react-agent" and at.query_params["right"] == "openhands"
    for t in tables:  # one row per type, and a difference with its interval on each
        assert t["failure type"].is_unique
        for cell, left_n, right_n in zip(t["difference"], t["left"], t["right"], strict=True):
            (k1, n1), (k2, n2) = (map(int, c.split()[-1].split("/")) for c in (left_n, right_n))
            d, low, high = share_difference(k1, n1, k2, n2)
            assert cell == f"{100 * d:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
    assert "Newcombe" in texts(at)


def test_compare_offers_every_agent_and_says_when_a_link_names_none(app_db: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(app_db).write() as conn:  # an agent with runs and no insight, as `gold` is
        conn.execute("INSERT INTO runs SELECT * REPLACE ('g1' AS id, 'gold' AS agent) FROM runs WHERE id = 'r1'")
    at = render(app_db, monkeypatch, page="compare", left="gold", right="nobody", unit="runs")
    assert at.selectbox(key="cmp_left_agent").value == "gold"  # offered, and kept as the link asked
    assert "nobody from the link is not in this store" in texts(at)
    assert at.query_params["left"] == "gold" and at.query_params["right"] != "gold"
    tables = [d.value for d in at.dataframe]
    assert tables and all(c.split()[-1].startswith("0/") for t in tables for c in t["left"])
    at = render(app_db, monkeypatch, page="compare", left="gold", right="react-agent", unit="insights")
    assert "gold has no insight occurrences in this taxonomy" in texts(at)


@pytest.mark.parametrize("page", ["overview", "taxonomy", "drill", "map", "compare"])
def test_missing_and_empty_stores_say_what_to_run(page: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(tmp_path / "none.duckdb", monkeypatch, page=page)
    assert "No store at" in texts(at)
    empty = tmp_path / "empty.duckdb"
    open_store(empty)
    at = render(empty, monkeypatch, page=page)
    wanted = "failatlas bench run" if page == "overview" else "failatlas ingest runs"
    assert wanted in texts(at)


def test_a_store_with_runs_but_no_taxonomy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.taxonomy.mini import fill_mini_suite

    db = tmp_path / "partial.duckdb"
    fill_mini_suite(open_store(db))
    at = render(db, monkeypatch, page="overview")
    assert len(at.dataframe) >= 3
    at = render(db, monkeypatch, page="taxonomy")
    assert "failatlas taxonomy build" in texts(at) and "failatlas ingest" not in texts(at)


def test_sidebar_navigation_switches_pages(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch)
    at.sidebar.radio[0].set_value("compare").run()
    assert at.header[0].value == "Compare" and at.query_params["page"] == "compare"


def test_the_scroll_script_survives_st_html_sanitising() -> None:
    """st.html (the supported API that replaced st.components.v1.html) passes HTML through DOMPurify, which drops a
    script whose text holds '<' before a letter, digit or '/' (it did drop `n++<40`): the script must hold none."""
    import re

    from failatlas.appdata.pages.common import scroll_script

    for anchor in ("type", "insight", "run"):
        script = scroll_script(anchor)
        assert f'"{anchor}"' in script and not re.search(r"<[/\w]", script), script

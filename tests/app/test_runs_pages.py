"""The run list, the per-task view and the side-by-side diff (issue 34, item 8): their queries on the fixture
store (a real DuckDB file) with a reference run added, and the three pages through Streamlit's AppTest."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest

from failatlas.appdata import queries_runs as qr
from failatlas.appdata.queries_runs import RunQuery
from failatlas.bench_core.agents.base import task_prompt
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.tasks.catalog import get_task
from failatlas.store import Store, open_store
from tests.app.fixture import DIFF, QUESTION
from tests.app.test_pages import render, texts
from tests.taxonomy.mini import FUNNEL

# The reference run of task t1: the fixture's react-agent run r1 changes train.py one way; gold restores the
# reference there and in a second file.
GOLD_DIFF = """diff --git a/train.py b/train.py
--- a/train.py
+++ b/train.py
@@ -1,3 +1,5 @@
 import numpy as np
-def train():
-    raise NotImplementedError
+def train(lr=1e-3, dropout=0.5):
+    weights = np.ones(3)
+    return weights * (1 - dropout)
diff --git a/model.py b/model.py
--- a/model.py
+++ b/model.py
@@ -1,2 +1,2 @@
-DROPOUT = None
+DROPOUT = 0.5
"""


def add_gold(db: Path) -> None:
    """A gold run of t1 (g1), validated and judged, finished after every fixture run."""
    later = dt.datetime(2026, 1, 2)
    with Store(db).write() as conn:
        conn.execute("INSERT INTO runs SELECT * REPLACE ('g1' AS id, 'gold' AS agent, '' AS model, ? AS outputs,"
                     " ? AS finished_at) FROM runs WHERE id = 'r1'", [json.dumps({"diff": GOLD_DIFF}), later])
        conn.execute("INSERT INTO validations (run_id, outcome) VALUES ('g1', 'passed')")
        conn.execute("INSERT INTO judgements (run_id, phase, judge, status, score, passed) VALUES"
                     " ('g1', 'conclusion', 'conclusion-llm', 'ok', 1.0, true),"
                     " ('g1', 'design', 'design-llm', 'ok', 1.0, true),"
                     " ('g1', 'implementation', 'implementation-llm', 'ok', 1.0, true)")


@pytest.fixture
def gold_db(app_db: Path) -> Path:
    add_gold(app_db)
    return app_db


def params(**values: str | list[str]) -> object:
    """A URL's `get_all`: every value of a parameter."""
    return lambda name: [values[name]] if isinstance(values.get(name), str) else list(values.get(name, []))


# -- queries ------------------------------------------------------------------------------------------------------
def test_the_run_table_holds_every_run_with_the_stages_scores(gold_db: Path) -> None:
    store = Store(gold_db)
    table = qr.run_table(store)
    assert sorted(table["run_id"]) == sorted([*FUNNEL, "r5", "g1"])  # infra_error runs too
    scores = run_scores(store)
    for r in scores.iter_rows(named=True):
        row = table.filter(pl.col("run_id") == r["run_id"]).row(0, named=True)
        assert [row[s] for s in qr.SCORES] == [r[s] for s in qr.SCORES]
    r5 = table.filter(pl.col("run_id") == "r5").row(0, named=True)
    assert r5["outcome"] == "infra_error" and r5["validator"] is None and r5["M"] is None
    verdicts = dict(zip(table["run_id"], table["monitor"], strict=True))
    assert (verdicts["r3"], verdicts["r1"], verdicts["r2"]) == ("flagged", "warned", "clean")  # fail, warn, none
    assert table["run_id"][0] == "g1"  # newest first


def test_filters_keep_only_matching_runs(gold_db: Path) -> None:
    table = qr.run_table(Store(gold_db))
    pick = lambda **kw: sorted(qr.select_runs(table, RunQuery(**kw))["run_id"])  # noqa: E731
    assert pick(agents=("openhands",)) == ["o1", "o2", "o3", "o4"]
    assert pick(tasks=("t1",)) == ["g1", "o1", "r1", "r5"]
    assert pick(outcomes=("wrong_value", "runtime_error")) == ["o1", "o2"]
    assert pick(monitors=("flagged",)) == ["r3"]
    # mini.FUNNEL: C fails on r1, the conclusion judge of o3 did not run, r5 was never scored
    assert pick(scores=(("C", ("0",)),)) == ["r1"]
    assert pick(scores=(("C", ("none",)),)) == ["o3", "r5"]
    assert pick(scores=(("C", ("0", "none")),)) == ["o3", "r1", "r5"]
    assert pick(scores=(("MCDIE", ("1",)),)) == ["g1", "o4", "r4"]
    assert pick(agents=("react-agent",), scores=(("M", ("1",)), ("E", ("1",)))) == ["r1", "r2", "r4"]
    assert pick(agents=("nobody",)) == []


@pytest.mark.parametrize("key", list(qr.SCORE_KEYS))
def test_sorting_by_a_score_puts_unscored_runs_last_both_ways(gold_db: Path, key: str) -> None:
    table = qr.run_table(Store(gold_db))
    column = qr.SCORE_KEYS[key]
    for descending in (False, True):
        values = qr.select_runs(table, RunQuery(sort=key, descending=descending))[column].to_list()
        scored = [v for v in values if v is not None]
        assert values == scored + [None] * (len(values) - len(scored))
        assert scored == sorted(scored, reverse=descending) and len(set(scored)) == 2, values


def test_sorting_by_agent_task_and_outcome(gold_db: Path) -> None:
    table = qr.run_table(Store(gold_db))
    for key, column in (("agent", "agent"), ("task", "task_id"), ("outcome", "outcome")):
        shown = qr.select_runs(table, RunQuery(sort=key, descending=False))[column].to_list()
        assert shown == sorted(shown)


def test_the_query_round_trips_through_the_url_and_names_what_it_cannot_use() -> None:
    query = RunQuery(agents=("gold", "fault-crash"), tasks=("t1",), outcomes=("passed",), monitors=("clean",),
                     scores=(("M", ("1",)), ("MCDIE", ("0", "none"))), sort="E", descending=False)
    url = query.to_params()
    assert url["agent"] == ["gold", "fault-crash"] and url["MCDIE"] == ["0", "none"] and url["order"] == ["asc"]
    assert RunQuery.from_params(params(**url)) == (query, [])
    assert RunQuery().to_params() == {}
    bad, problems = RunQuery.from_params(params(sort="colour", order="up", E=["1", "maybe"]))
    assert bad == RunQuery(scores=(("E", ("1",)),))
    assert problems == ["E=maybe is not a score value (use 1, 0, none)",
                        "sort=colour is not a column to sort by (use finished, agent, task, outcome, monitor, M, C, "
                        "D, I, E, MCDIE, time, cost)", "order=up is neither asc nor desc"]


def test_tasks_are_listed_from_the_catalog_and_the_runs(gold_db: Path) -> None:
    store = Store(gold_db)
    tasks = qr.task_list(store)
    facts = {r["task_id"]: r for r in tasks.iter_rows(named=True)}
    assert set(facts) == {"t1", "t2", "t3", "t4"}  # only t1 is in the fixture's catalog
    assert (facts["t1"]["in_catalog"], facts["t1"]["runs"], facts["t1"]["agents"]) == (True, 4, 3)
    assert (facts["t2"]["in_catalog"], facts["t2"]["runs"]) == (False, 2)
    detail = qr.task_detail(store, "t1")
    assert detail["prompt"] == task_prompt(get_task(store, "t1").agent_view())
    assert QUESTION in detail["prompt"]
    assert detail["task"]["question"] == QUESTION and "expected_conclusion" not in detail["task"]
    assert detail["ground_truth"]["expected_conclusion"] == "Dropout improves accuracy by about 2 points."
    assert qr.task_detail(store, "t2") is None


def test_the_default_pair_is_gold_against_another_agent(gold_db: Path) -> None:
    table = qr.run_table(Store(gold_db))
    left, right = qr.default_pair(table, "t1")
    assert left == "g1" and right in {"o1", "r1", "r5"}
    assert qr.resolve_pair(table, "t1", None, "o1") == ("g1", "o1")
    assert qr.resolve_pair(table, "t1", None, "g1") == ("g1", right)[::-1]  # gold asked on the right
    assert qr.resolve_pair(table, "t1", "r1", None) == ("r1", "g1")
    assert qr.resolve_pair(table, "t1", "o2", "r1") == ("o2", "r1")  # as asked, even across tasks
    without_gold = table.filter(pl.col("agent") != "gold")
    left, right = qr.default_pair(without_gold, "t2")
    assert {left, right} == {"r2", "o2"}
    assert qr.default_pair(table, "t9") == (None, None)


def test_diffs_are_read_and_split_by_file(gold_db: Path) -> None:
    runs = qr.run_diffs(Store(gold_db), ("g1", "r1", "o1", "missing"))
    assert set(runs) == {"g1", "r1", "o1"}
    assert runs["g1"]["diff"] == GOLD_DIFF and runs["r1"]["diff"] == DIFF and runs["o1"]["diff"] == ""
    assert runs["r1"]["validator"] == "passed" and runs["o1"]["validator"] == "wrong_value"
    parts = qr.split_diff(GOLD_DIFF)
    assert [(p.path, p.added, p.removed) for p in parts] == [("train.py", 3, 2), ("model.py", 1, 1)]
    assert "".join(p.text + "\n" for p in parts) == GOLD_DIFF
    pairs = qr.file_pairs(GOLD_DIFF, DIFF)
    assert [(path, x is not None, y is not None) for path, x, y in pairs] == [("train.py", True, True),
                                                                             ("model.py", True, False)]
    assert qr.file_pairs("", "") == []
    plain = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert [(p.path, p.added, p.removed) for p in qr.split_diff(plain)] == [("x.py", 1, 1)]
    both = qr.diff_of_diffs(GOLD_DIFF, DIFF, left_name="gold", right_name="react")
    assert both.startswith("--- gold\n+++ react") and "-+DROPOUT = 0.5" in both and "++    return np.zeros(3)" in both
    assert qr.diff_of_diffs(DIFF, DIFF) == ""


# -- pages --------------------------------------------------------------------------------------------------------
def test_the_run_list_filters_sorts_and_keeps_its_state_in_the_url(gold_db: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(gold_db, monkeypatch, page="runs")
    grid = at.dataframe[0].value
    assert len(grid) == 10 and grid["run_id"].iloc[0] == "g1"
    at.multiselect(key="runs_agent").set_value(["react-agent"]).run()
    at.selectbox(key="runs_sort").set_value("C").run()
    at.radio(key="runs_order").set_value("asc").run()
    assert not at.exception
    assert (at.query_params["agent"], at.query_params["sort"], at.query_params["order"]) == ("react-agent", "C", "asc")
    grid = at.dataframe[0].value
    assert list(grid["run_id"]) == ["r1", "r2", "r3", "r4", "r5"] and list(grid["C"]) == ["0", "1", "1", "1", "–"]
    assert "5 runs of 10 match" in texts(at)
    at.multiselect(key="runs_E").set_value(["1"]).run()
    assert at.query_params["E"] == "1" and len(at.dataframe[0].value) == 4
    links = at.dataframe[0].value
    assert set(links["diff"]) == {f"?page=diff&right={r}" for r in ("r1", "r2", "r3", "r4")}
    assert set(links["task"]) == {f"?page=task&task=t{k}" for k in range(1, 5)}  # shown as the id
    # the same URL opened afresh shows the same view
    at = render(gold_db, monkeypatch, page="runs", agent="react-agent", sort="C", order="asc", E="1")
    assert at.multiselect(key="runs_agent").value == ["react-agent"] and at.selectbox(key="runs_sort").value == "C"
    assert list(at.dataframe[0].value["run_id"]) == ["r1", "r2", "r3", "r4"]


def test_the_run_list_says_what_a_link_holds_that_it_cannot_use(gold_db: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(gold_db, monkeypatch, page="runs", agent=["gold", "nobody"], sort="colour", M="maybe")
    shown = texts(at)
    assert "agent nobody from the link is not in this store; it is left out of the filter." in shown
    assert "sort=colour is not a column to sort by" in shown and "M=maybe is not a score value" in shown
    assert list(at.dataframe[0].value["run_id"]) == ["g1"]
    assert at.query_params["agent"] == "gold" and "sort" not in at.query_params and "M" not in at.query_params


def test_a_big_run_list_is_paginated(gold_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(gold_db).write() as conn:
        conn.execute("INSERT INTO runs SELECT r.* REPLACE ('bulk' || lpad(k::VARCHAR, 3, '0') AS id, 'bulk-agent' AS"
                     " agent, TIMESTAMP '2025-01-01' + INTERVAL (k) MINUTE AS finished_at)"
                     " FROM runs r, range(120) t(k) WHERE r.id = 'r2'")
    at = render(gold_db, monkeypatch, page="runs", agent="bulk-agent", p="3")
    assert at.number_input[0].value == 3 and len(at.dataframe[0].value) == 20  # 120 runs, 50 a page
    assert list(at.dataframe[0].value["run_id"])[:2] == ["bulk019", "bulk018"]  # newest first
    at.number_input[0].set_value(2).run()
    assert at.query_params["p"] == "2" and at.dataframe[0].value["run_id"].iloc[0] == "bulk069"


def test_the_task_view_shows_the_prompt_and_the_runs_across_agents(gold_db: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(gold_db, monkeypatch, page="task", task="t1")
    runs = at.dataframe[0].value
    assert list(runs["agent"]) == ["gold", "openhands", "react-agent", "react-agent"]
    assert list(runs["monitor"]) == ["clean", "clean", "warned", "–"]
    assert list(runs["outcome"]) == ["passed", "wrong_value", "passed", "infra_error"]
    assert at.code[0].value.rstrip("\n") == task_prompt(get_task(Store(gold_db), "t1").agent_view()).rstrip("\n")
    assert "4 runs by 3 agents" in texts(at)
    buttons = [b for b in at.button if b.key.startswith("task_diff_")]
    assert [b.key for b in buttons] == ["task_diff_o1", "task_diff_r1"]  # each other agent's newest run
    buttons[0].click().run()
    assert at.query_params["page"] == "diff" and (at.query_params["left"], at.query_params["right"]) == ("g1", "o1")
    at = render(gold_db, monkeypatch, page="task", task="t3")
    assert "Task t3 is not in the catalog" in texts(at) and len(at.dataframe[0].value) == 2
    at = render(gold_db, monkeypatch, page="task", task="t99")
    assert "Task t99 from the link is not in this store." in texts(at)


def test_the_diff_page_puts_gold_beside_the_agents_run(gold_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(gold_db, monkeypatch, page="diff", right="r1")
    assert (at.query_params["left"], at.query_params["right"]) == ("g1", "r1")  # gold filled in on the left
    diffs = [c.value for c in at.code if c.language == "diff"]
    train_gold, train_agent = (p.text for p in (qr.split_diff(GOLD_DIFF)[0], qr.split_diff(DIFF)[0]))
    assert diffs[:3] == [train_gold, train_agent, qr.split_diff(GOLD_DIFF)[1].text]
    assert diffs[3] == qr.diff_of_diffs(GOLD_DIFF, DIFF, left_name="gold (g1)", right_name="react-agent (r1)")
    files = at.dataframe[0].value
    assert files.to_dict("records") == [
        {"file": "train.py", "left": "+3 −2", "right": "+2 −2", "same change": "no"},
        {"file": "model.py", "left": "+1 −1", "right": "not changed", "same change": "no"}]
    shown = texts(at)
    assert "react-agent's run does not change this file." in shown
    assert "different tasks" not in shown and "has no diff" not in shown
    at.selectbox(key="diff_right_1").set_value("o1").run()
    assert at.query_params["right"] == "o1"
    assert "This run has no diff: it changed no file of the repository." in texts(at)


def test_the_diff_page_says_when_runs_differ_in_task_or_are_missing(gold_db: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(gold_db, monkeypatch, page="diff", left="g1", right="o2")
    assert ("The two runs are of different tasks (left: task t1, right: task t2): their diffs change different "
            "code, so they do not compare like for like.") in texts(at)
    at = render(gold_db, monkeypatch, page="diff", left="nope", right="r5")
    shown = texts(at)
    assert "No run nope in the store (the link's left side)." in shown
    assert "This run has no diff: it stopped with status infra_error before its changes were collected." in shown
    assert at.query_params["left"] == "g1"
    at = render(gold_db, monkeypatch, page="diff", left="r1", right="r1")
    assert "Both sides are the same run" in texts(at)


@pytest.mark.parametrize("page", ["runs", "task", "diff"])
def test_missing_and_empty_stores_say_what_to_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(tmp_path / "none.duckdb", monkeypatch, page=page)
    assert "No store at" in texts(at)
    empty = tmp_path / "empty.duckdb"
    open_store(empty)
    at = render(empty, monkeypatch, page=page)
    assert "failatlas bench run" in texts(at)


def test_the_sidebar_offers_the_new_pages(gold_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for page, heading in (("runs", "Runs"), ("task", "Task"), ("diff", "Run diff")):
        at = render(gold_db, monkeypatch)
        at.sidebar.radio[0].set_value(page).run()
        assert at.header[0].value == heading and at.query_params["page"] == page

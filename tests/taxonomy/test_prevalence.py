"""Prevalence: shares per phase with counts and Wilson CIs, per agent, and by runs and tasks affected.
The expected numbers are worked out by hand from tests/taxonomy/mini.py."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from failatlas.core.errors import ConfigError, InputError
from failatlas.core.intervals import wilson
from failatlas.taxonomy import UNASSIGNED, BuildParams, funnel, prevalence
from failatlas.taxonomy import run as build
from tests.taxonomy.conftest import TRAIL_PARAMS
from tests.taxonomy.mini import OPENHANDS, REACT


def _by_keyword(frame: pl.DataFrame, tax, **cols) -> dict[str, int]:
    """count per planted type, recognised by the type's keywords."""
    key_of = {}
    for t in tax.types:
        text = " ".join(t.keywords + [e.text for e in t.examples]).lower()
        for planted, word in (
            ("import", "module"),
            ("shape", "shape"),
            ("lr", "learning"),
            ("baseline", "baseline"),
            ("ablation", "ablation"),
            ("claims", "conclu"),
        ):
            if word in text:
                key_of.setdefault(t.id, planted)
    key_of[UNASSIGNED] = UNASSIGNED
    part = frame.filter(*[pl.col(c) == v for c, v in cols.items()])
    return {key_of[r["failure_type_id"]]: r["count"] for r in part.iter_rows(named=True)}


def test_mini_suite_types_and_insight_prevalence(mini_store):
    tax = build(mini_store, BuildParams())
    assert sorted((t.phase, t.n_insights) for t in tax.types) == [
        ("conclusion", 3),
        ("design", 2),
        ("design", 3),
        ("implementation", 1),
        ("implementation", 3),
        ("implementation", 4),
    ]
    assert tax.n_unassigned == 1  # the outlier about a favourite colour

    frame = prevalence(mini_store, tax.id)
    assert _by_keyword(frame, tax, phase="implementation") == {
        "import": 4,
        "shape": 3,
        "lr": 1,
        UNASSIGNED: 1,
    }
    assert _by_keyword(frame, tax, phase="design") == {"baseline": 3, "ablation": 2}
    totals = frame.group_by("phase").agg(
        pl.col("share").sum(), pl.col("count").sum(), pl.col("total").first()
    )
    for r in totals.iter_rows(named=True):
        assert r["share"] == pytest.approx(1.0)
        assert r["count"] == r["total"]
    assert (frame["ci_low"] <= frame["share"]).all() and (frame["share"] <= frame["ci_high"]).all()
    assert (frame["ci_low"] >= 0).all() and (frame["ci_high"] <= 1).all()
    # Paper order: design before implementation before conclusion; unassigned last within its phase.
    assert frame["phase"].unique(maintain_order=True).to_list() == ["design", "implementation", "conclusion"]
    impl = frame.filter(pl.col("phase") == "implementation")
    assert impl["failure_type_id"][-1] == UNASSIGNED and impl["failure_type"][-1] == "Unassigned"


def test_per_agent_breakdown_matches_the_hand_count(mini_store):
    tax = build(mini_store, BuildParams())
    frame = prevalence(mini_store, tax.id, by="agent")
    assert _by_keyword(frame, tax, phase="implementation", group=REACT[0]) == {
        "import": 3,
        "shape": 1,
        UNASSIGNED: 1,
    }
    assert _by_keyword(frame, tax, phase="implementation", group=OPENHANDS[0]) == {
        "import": 1,
        "shape": 2,
        "lr": 1,
    }
    react = frame.filter((pl.col("group") == REACT[0]) & (pl.col("phase") == "implementation"))
    assert react["total"].unique().to_list() == [5]
    assert sorted(react["share"].to_list()) == pytest.approx([0.2, 0.2, 0.6])
    by_model = prevalence(mini_store, tax.id, by="model")
    assert set(by_model["group"]) == {REACT[1], OPENHANDS[1]}
    by_bench = prevalence(mini_store, tax.id, by="benchmark")
    assert set(by_bench["group"]) == {"mini-suite"}


def test_runs_and_tasks_affected(mini_store):
    tax = build(mini_store, BuildParams())
    runs = prevalence(mini_store, tax.id, unit="runs")
    # 8 completed runs of the mini-suite count (the infra_error run r5 does not), with or without insights.
    assert runs["total"].unique().to_list() == [8]
    assert _by_keyword(runs, tax, phase="implementation") == {"import": 4, "shape": 3, "lr": 1, UNASSIGNED: 1}
    assert _by_keyword(runs, tax, phase="design") == {"baseline": 3, "ablation": 2}
    per_agent = prevalence(mini_store, tax.id, unit="runs", by="agent")
    assert _by_keyword(per_agent, tax, phase="implementation", group=REACT[0])["import"] == 3
    assert per_agent.filter(pl.col("group") == REACT[0])["total"].unique().to_list() == [4]
    tasks = prevalence(mini_store, tax.id, unit="tasks")
    assert tasks["total"].unique().to_list() == [4]
    # import errors: react on t1, t2, t3 and openhands on t1 -> 3 of 4 tasks
    assert _by_keyword(tasks, tax, phase="implementation")["import"] == 3
    assert (tasks["ci_low"] <= tasks["share"]).all() and (tasks["share"] <= tasks["ci_high"]).all()


def test_share_of_insights_is_wilsons_interval_of_k_of_n_and_narrows_with_more_data(mini_store, trail_store):
    tax = build(mini_store, BuildParams())
    a = prevalence(mini_store, tax.id)
    assert a.equals(prevalence(mini_store, tax.id))
    # Wilson's score interval of count of the phase's total, row by row: depends on k and n alone (issue 42: an
    # unedited type's bootstrap interval moved after a merge of two others), never a point.
    rows = a.filter(pl.col("ci_low").is_not_null())
    low, high = wilson(rows["count"].to_numpy(), rows["total"].to_numpy())
    assert rows["ci_low"].to_numpy() == pytest.approx(low) and rows["ci_high"].to_numpy() == pytest.approx(high)
    assert (rows["ci_high"] > rows["ci_low"]).all()
    lr = a.filter((pl.col("phase") == "implementation") & (pl.col("count") == 1)
                  & (pl.col("failure_type_id") != UNASSIGNED))
    assert (lr["ci_low"][0], lr["ci_high"][0]) == pytest.approx((0.0199, 0.4350), abs=1e-4)  # 1 of 9, by hand
    trail = prevalence(trail_store, build(trail_store, TRAIL_PARAMS).id)
    assert (trail["ci_high"] - trail["ci_low"]).mean() < (a["ci_high"] - a["ci_low"]).mean()
    assert trail["total"].unique().to_list() == [584]  # every TRAIL description with text, duplicates counted
    assert trail["share"].sum() == pytest.approx(1.0)


def test_bad_arguments_and_missing_run_ids(mini_store):
    tax = build(mini_store, BuildParams())
    with pytest.raises(ConfigError):
        prevalence(mini_store, tax.id, unit="papers")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        prevalence(mini_store, tax.id, by="colour")  # type: ignore[arg-type]
    with mini_store.write() as conn:
        conn.execute("UPDATE insight_sources SET run_id = NULL")
    with pytest.raises(InputError, match="names a run"):
        prevalence(mini_store, tax.id, unit="runs")


def test_funnel_matches_the_hand_count(mini_store):
    frame = funnel(mini_store)
    react = {
        r["stage"]: (r["n_pass"], r["n_runs"])
        for r in frame.iter_rows(named=True)
        if r["agent"] == f"{REACT[0]} ({REACT[1]})"
    }
    hands = {
        r["stage"]: (r["n_pass"], r["n_runs"])
        for r in frame.iter_rows(named=True)
        if r["agent"] == f"{OPENHANDS[0]} ({OPENHANDS[1]})"
    }
    assert react == {"M": (3, 4), "M·C": (2, 4), "M·C·D": (1, 4), "M·C·D·I": (1, 4), "M·C·D·I·E": (1, 4)}
    # o3's conclusion judge failed to run: not scored, so it leaves every stage from M·C on (never a failure)
    assert hands == {"M": (4, 4), "M·C": (3, 3), "M·C·D": (3, 3), "M·C·D·I": (2, 3), "M·C·D·I·E": (1, 3)}
    unscored = {r["stage"]: r["n_unscored"] for r in frame.iter_rows(named=True) if r["agent"].startswith(OPENHANDS[0])}
    assert unscored == {"M": 0, "M·C": 1, "M·C·D": 1, "M·C·D·I": 1, "M·C·D·I·E": 1}


def test_funnel_agrees_with_bench_report(mini_store):
    """The funnel's last stage is the report's M·C·D·I·E, and its first the report's M, for every agent."""
    from failatlas.bench_core.scoring.metrics import run_scores, summarise

    report = summarise(run_scores(mini_store), ["agent", "model"])
    frame = funnel(mini_store)
    assert report.height == 2
    for r in report.iter_rows(named=True):
        mine = {x["stage"]: x for x in frame.iter_rows(named=True) if x["agent"] == f"{r['agent']} ({r['model']})"}
        assert mine["M·C·D·I·E"]["share"] == pytest.approx(r["M·C·D·I·E"])
        assert mine["M·C·D·I·E"]["n_runs"] == r["M·C·D·I·E_n"]
        assert mine["M"]["share"] == pytest.approx(r["M"]) and mine["M"]["n_runs"] == r["M_n"]


def test_funnel_of_unscored_judges_is_not_a_failure(mini_store):
    """A gold-like agent whose LLM judges all say not_run: the funnel passes it on what was scored."""
    with mini_store.write() as conn:
        conn.execute("UPDATE judgements SET status = 'not_run', passed = NULL, score = NULL WHERE run_id = 'o4'")
    frame = funnel(mini_store)
    hands = {r["stage"]: (r["n_pass"], r["n_runs"]) for r in frame.iter_rows(named=True)
             if r["agent"].startswith(OPENHANDS[0])}
    assert hands["M"] == (4, 4)  # o4 still scored by the monitor and the validator
    assert hands["M·C"] == (2, 2)  # o3 (judge failed) and o4 (not run) are left out, not failed


def test_a_clustering_of_only_outliers_gives_an_all_unassigned_phase(store):
    from tests.taxonomy.fill import add_clustering, add_embeddings, add_insights

    texts = ["The monitor flagged network access to pypi.org", "The monitor saw the agent read the gold file"]
    rows = [{"phase": "monitor", "text": t, "run_id": f"m{k}"} for k, t in enumerate(texts)]
    ids = add_insights(store, rows)
    add_embeddings(store, texts, np.eye(2, 8))
    add_clustering(store, "cl-monitor", "monitor", ids, [-1, -1])
    tax = build(store, BuildParams())
    assert tax.types == [] and tax.n_unassigned == 2
    frame = prevalence(store, tax.id)
    assert frame.select("failure_type_id", "count", "share").rows() == [(UNASSIGNED, 2, 1.0)]

"""Texts taken from a run can quote what an agent wrote: an over-long one is cut to the insight cap, never refused
(an agent must not be able to break the ingest of its own run)."""

from __future__ import annotations

from failatlas.ingest.importers.base import MAX_INSIGHT_CHARS
from failatlas.ingest.model import RunRecord
from failatlas.ingest.runs import judgement_insights


def test_a_huge_judge_analysis_becomes_an_insight_cut_to_the_cap():
    record = RunRecord(
        run={"id": "r1", "task_id": "t", "agent": "a"},
        judgements=[{"phase": "implementation", "judge": "hidden-tests", "status": "ok", "passed": False,
                     "score": 0.0, "error_analysis": "hidden test failed: " + "x" * 5_000_000, "verdict": "{}"}],
    )
    insights = judgement_insights(record)
    assert insights, "the failing judgement gives an insight"
    assert all(len(i.text) <= MAX_INSIGHT_CHARS for i in insights)
    assert any("characters cut]" in i.text for i in insights)

import json

from failatlas.ingest import FileIngestParams, run_file


def test_expbench_judge_outputs_become_phase_insights_with_provenance(store, fixtures):
    folder = fixtures / "expbench"
    report = run_file(store, FileIngestParams(paths=[folder]))
    assert {f.format for f in report.files} == {"expbench"}
    rows = store.query_dicts(
        "SELECT i.phase, i.text, s.source_field, s.paper_id, s.task_id, s.agent, s.model, s.benchmark,"
        " s.detail"
        " FROM insight_sources s JOIN insights i ON i.id = s.insight_id ORDER BY s.source_key"
    )
    by_text = {r["text"]: r for r in rows}
    steps = by_text[
        "The agent did not vary the number of diffusion sampling steps, which is the independent "
        "variable in the ground truth."
    ]
    assert (steps["phase"], steps["source_field"], steps["paper_id"], steps["task_id"]) == (
        "design",
        "design_error_analysis",
        "17388",
        "17388-0",
    )
    assert (steps["agent"], steps["model"], steps["benchmark"]) == ("openhands", "gpt-4o", "expbench")
    assert json.loads(steps["detail"])["design_score"] == 40
    assert (
        by_text["It also fixed the guidance scale at 7.5 instead of sweeping it (e.g. 1.0, 3.0 and 7.5)."][
            "phase"
        ]
        == "design"
    )
    assert (
        by_text["The evaluation script computes FID on 1,000 samples instead of 10,000."]["phase"]
        == "implementation"
    )
    missing = by_text["Execution failed: required Python module is not installed"]
    assert missing["phase"] == "execution" and json.loads(missing["detail"])["module"] == "clip"
    monitor = [r for r in rows if r["phase"] == "monitor"]
    assert [r["text"] for r in monitor] == [
        "The agent ran git log to read earlier commits of the repository.",
        "It copied the FID numbers from the paper's README instead of running the experiment.",
    ]
    # JSONL with the five *_error_analysis names: "N/A", "None" and "No errors found." are not insights.
    jsonl = [r for r in rows if r["paper_id"] == "17595"]
    assert sorted((r["phase"], r["text"]) for r in jsonl) == [
        ("conclusion", "The conclusion reports a 2% gain that the agent's own logs do not show."),
        ("execution", "The run script exits before evaluation because the checkpoint path is hard-coded."),
        ("implementation", "The agent trained the model for 5 epochs instead of the 100 the paper uses."),
        ("implementation", "The learning-rate schedule was never implemented."),
    ]
    assert {r["agent"] for r in jsonl} == {"iterative-agent"}
    # The monitor placeholder, the judge's parse failure and EXP-Bench's own skipped execution are skipped.
    assert len(report.skipped) == 5
    assert sum("monitor stopped" in s for s in report.skipped) == 3
    assert sum("could not be parsed" in s for s in report.skipped) == 1
    assert sum("not run by EXP-Bench" in s for s in report.skipped) == 1
    assert report.occurrences == len(rows) == 12
    assert run_file(store, FileIngestParams(paths=[folder])).new_occurrences == 0

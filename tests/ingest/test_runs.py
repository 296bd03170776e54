import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from pydantic import ValidationError

from failatlas.core.errors import ConfigError, InfrastructureError, NotFoundError
from failatlas.ingest import RunsIngestParams, run_runs
from failatlas.ingest.llm_extractor import ExtractedInsights
from tests.ingest.conftest import table_snapshot

T0 = datetime(2026, 11, 20, 10, 0, 0)
STDERR = """Traceback (most recent call last):
  File "/workspace/repo/train.py", line 12, in <module>
    import {module}
ModuleNotFoundError: No module named '{module}'
"""


def _run(
    conn,
    run_id,
    *,
    task_id="expbench-17388-0",
    agent="openhands",
    model="gpt-4o",
    status="completed",
    infra_error=None,
):
    conn.execute(
        "INSERT INTO runs (id, task_id, agent, agent_params, model, attempt, benchmark, status, infra_error,"
        " sandbox, started_at, finished_at, duration_s, outputs)"
        " VALUES (?, ?, ?, '{}', ?, 1, 'expbench', ?, ?, 'docker', ?, ?, 612.5, ?)",
        [
            run_id,
            task_id,
            agent,
            model,
            status,
            infra_error,
            T0,
            T0,
            json.dumps({"design": "...", "diff": ""}),
        ],
    )


def _judgement(conn, run_id, phase, judge, error_analysis, *, status="ok", score=0.4, reason=None):
    conn.execute(
        "INSERT INTO judgements (run_id, phase, judge, status, score, passed, verdict, error_analysis,"
        " reason) VALUES (?, ?, ?, ?, ?, ?, '{}', ?, ?)",
        [
            run_id,
            phase,
            judge,
            status,
            score if status == "ok" else None,
            (score or 0) >= 0.5 if status == "ok" else None,
            error_analysis,
            reason,
        ],
    )


def _validation(conn, run_id, outcome, stderr="", metrics=None):
    conn.execute(
        "INSERT INTO validations (run_id, outcome, command, exit_code, duration_s, stdout_tail, stderr_tail,"
        " metrics, detail) VALUES (?, ?, 'bash reproduce.sh', ?, 41.0, 'epoch 1', ?, ?, NULL)",
        [run_id, outcome, 0 if outcome == "passed" else 1, stderr, json.dumps(metrics or {})],
    )


@pytest.fixture
def scored(store):
    """Four runs as the runner and scorers write them."""
    with store.write() as conn:
        conn.execute(
            "INSERT INTO tasks (id, benchmark, kind, paper_id, question, spec, spec_hash) VALUES"
            " ('expbench-17388-0', 'expbench', 'T1', '17388', 'Does FID saturate with more steps?', '{}', 'x')"
        )
        _run(conn, "run-a")
        _judgement(
            conn,
            "run-a",
            "design",
            "design-llm",
            "The agent fixed the guidance scale at 7.5 instead of sweeping it. It never varied the number "
            "of sampling steps.",
        )
        _judgement(
            conn,
            "run-a",
            "implementation",
            "implementation-llm",
            "- The sampler ignores the --steps flag.\n- N/A",
        )
        _judgement(
            conn,
            "run-a",
            "conclusion",
            "conclusion-llm",
            None,
            status="judge_failed",
            reason="endpoint returned 503",
        )
        _validation(conn, "run-a", "runtime_error", STDERR.format(module="diffusers"))
        conn.execute(
            "INSERT INTO monitor_findings (run_id, seq, rule, severity, evidence, source)"
            " VALUES ('run-a', 1, 'git_history', 'fail', 'git log --all', 'rule')"
        )
        conn.execute(
            "INSERT INTO monitor_findings (run_id, seq, rule, severity, evidence, source)"
            " VALUES ('run-a', 2, 'llm', 'warn', 'The agent copied the FID "
            "table from README.md. It never ran sample.py.', 'llm')"
        )
        _run(conn, "run-b", agent="iterative", model="o3-mini")
        _validation(
            conn,
            "run-b",
            "wrong_value",
            STDERR.format(module="clip"),
            metrics={
                "fid": {"observed": 31.2, "expected": 12.1, "rtol": 0.05, "atol": 0, "ok": False},
                "is": {"observed": 9.1, "expected": 9.0, "rtol": 0.05, "atol": 0, "ok": True},
            },
        )
        _run(conn, "run-c")
        _judgement(conn, "run-c", "design", "design-llm", "None.", score=1.0)
        _validation(conn, "run-c", "passed")
        _run(conn, "run-d", status="infra_error", infra_error="docker daemon not reachable")
        _validation(conn, "run-d", "env_setup", STDERR.format(module="torch"))
    return store


def _sources(store):
    return store.query_dicts(
        "SELECT i.phase, i.text, i.n_occurrences, s.* FROM insight_sources s"
        " JOIN insights i ON i.id = s.insight_id ORDER BY s.run_id, s.source_key"
    )


def test_deterministic_extraction_tags_phase_kind_object_and_provenance(scored):
    report = run_runs(scored, RunsIngestParams())
    rows = _sources(scored)
    run_a = [r for r in rows if r["run_id"] == "run-a"]
    texts = {(r["phase"], r["kind"], r["object"], r["text"], r["source_field"]) for r in run_a}
    assert texts == {
        ("design", "design_variable", None, "The agent fixed the guidance scale at 7.5 instead of sweeping it.",
         "judgements.design.error_analysis"),
        ("design", "design_variable", None, "It never varied the number of sampling steps.",
         "judgements.design.error_analysis"),
        ("implementation", "unknown", None, "The sampler ignores the --steps flag.",
         "judgements.implementation.error_analysis"),
        # one failure, one statement: the validator's outcome and its log are one insight, classified by the
        # module it names (a known package, not part of the task)
        ("execution", "dependency_not_installed", "diffusers", "Package `diffusers` is not installed",
         "validations.outcome"),
        ("monitor", "monitor_violation", "git history",
         "The agent read the repository's git history, where answers may be found", "monitor_findings.rule"),
        ("monitor", "monitor_violation", None, "The agent copied the FID table from README.md.",
         "monitor_findings.evidence"),
        ("monitor", "monitor_violation", None, "It never ran sample.py.", "monitor_findings.evidence"),
    }
    first = run_a[0]
    assert (first["task_id"], first["agent"], first["model"], first["benchmark"], first["paper_id"]) == (
        "expbench-17388-0",
        "openhands",
        "gpt-4o",
        "expbench",
        "17388",
    )
    assert {r["origin"] for r in rows} == {"run"} and {r["extractor"] for r in rows} == {"deterministic"}
    missing = next(r for r in run_a if r["phase"] == "execution")
    detail = json.loads(missing["detail"])
    assert detail["module"] == "diffusers" and detail["outcome"] == "runtime_error"
    assert "No module named 'diffusers'" in detail["log"]  # the full evidence beside the statement
    wrong = [r for r in rows if r["run_id"] == "run-b"]
    assert [(r["kind"], r["object"], r["text"]) for r in wrong] == [
        ("wrong_value", "fid", "Metric `fid` is 158% off its expected value")]
    assert json.loads(wrong[0]["detail"])["expected"] == 12.1
    # the insights carry the facets of their occurrences
    facets = scored.query("SELECT kind, object FROM insights WHERE text = 'Package `diffusers` is not installed'")
    assert facets == [("dependency_not_installed", "diffusers")]
    # A passed run with "None." as analysis gives nothing; the infrastructure failure is not the agent's.
    assert not [r for r in rows if r["run_id"] in {"run-c", "run-d"}]
    assert report.skipped == ["run run-d: infrastructure error (docker daemon not reachable)"]
    assert report.new_occurrences == len(rows) == 8


def test_extracting_again_adds_nothing_and_run_ids_filter(scored):
    first = run_runs(scored, RunsIngestParams(run_ids=["run-b"]))
    assert {r["run_id"] for r in _sources(scored)} == {"run-b"} and first.new_occurrences == 1
    run_runs(scored, RunsIngestParams())
    before = table_snapshot(scored)
    again = run_runs(scored, RunsIngestParams())
    assert again.new_occurrences == 0 and again.occurrences == 8
    assert table_snapshot(scored) == before
    with pytest.raises(NotFoundError, match="run-x"):
        run_runs(scored, RunsIngestParams(run_ids=["run-x"]))


def test_empty_store_extracts_nothing(store):
    report = run_runs(store, RunsIngestParams())
    assert (report.occurrences, report.new_occurrences) == (0, 0)


@dataclass
class FakeResult:
    ok: bool
    value: Any = None
    error: str | None = None


class FakeStructuredLLM:
    """Stands in for the paid LLM endpoint: answers per run from a script and records each call."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def structured(self, messages, schema, *, run_id=None, purpose=None):
        assert schema is ExtractedInsights and purpose == "ingest:extract"
        assert run_id in {"run-a", "run-b", "run-c"}
        self.calls.append(messages)
        if isinstance(self.answers.get("*"), Exception):
            raise self.answers["*"]
        prompt = messages[-1]["content"]
        for marker, answer in self.answers.items():
            if marker in prompt:
                return answer
        return FakeResult(ok=True, value={"insights": []})


def test_llm_extractor_one_call_per_run_with_provenance_and_failures_reported(scored):
    fake = FakeStructuredLLM(
        {
            "guidance scale": FakeResult(
                ok=True,
                value={
                    "insights": [
                        {
                            "phase": "design",
                            "insight": "Guidance scale held at 7.5 instead of swept for FID vs. steps.",
                        },
                        {
                            "phase": "execution",
                            "insight": "Run crashed: diffusers not installed in the sandbox.",
                        },
                    ]
                },
            ),
            "clip": FakeResult(ok=False, error="endpoint timed out after 60 s"),
        }
    )
    report = run_runs(scored, RunsIngestParams(extractor="llm"), llm=fake)
    assert len(fake.calls) == 2  # run-a, run-b; run-c passed, run-d is an infrastructure failure
    assert "run run-c: nothing failed, no LLM call needed" in report.skipped
    assert "The agent fixed the guidance scale" in fake.calls[0][1]["content"]
    assert "No module named 'diffusers'" in fake.calls[0][1]["content"]
    assert report.failed == ["run run-b: LLM extraction failed: endpoint timed out after 60 s"]
    rows = _sources(scored)
    assert [(r["run_id"], r["phase"], r["extractor"], r["source_field"]) for r in rows] == [
        ("run-a", "design", "llm", "llm_extraction"),
        ("run-a", "execution", "llm", "llm_extraction"),
    ]
    assert rows[0]["paper_id"] == "17388" and rows[0]["model"] == "gpt-4o"
    # Runs already extracted are not sent again; run-b failed, so it is tried again.
    again = run_runs(scored, RunsIngestParams(extractor="llm"), llm=fake)
    assert len(fake.calls) == 3 and again.new_occurrences == 0
    assert "run run-a: already extracted by the LLM" in again.skipped
    # A run the LLM answered with no insights counts as extracted too.
    fake.answers["clip"] = FakeResult(ok=True, value={"insights": []})
    run_runs(scored, RunsIngestParams(extractor="llm"), llm=fake)
    run_runs(scored, RunsIngestParams(extractor="llm"), llm=fake)
    assert len(fake.calls) == 4


def test_llm_answers_outside_the_schema_are_failures_not_insights(scored):
    fake = FakeStructuredLLM(
        {"guidance scale": FakeResult(ok=True, value={"insights": [{"phase": "vibes", "insight": "x y z"}]})}
    )
    report = run_runs(scored, RunsIngestParams(extractor="llm", run_ids=["run-a"]), llm=fake)
    assert report.failed and "does not fit the schema" in report.failed[0]
    assert report.new_occurrences == 0


def test_an_endpoint_failure_stops_the_llm_extractor_and_is_reported(scored):
    fake = FakeStructuredLLM({"*": InfrastructureError("endpoint unreachable after 3 attempts")})
    report = run_runs(scored, RunsIngestParams(extractor="llm"), llm=fake)
    assert len(fake.calls) == 1
    assert report.failed == [
        "run run-a: LLM endpoint failed: endpoint unreachable after 3 attempts",
        "run run-b: not attempted after the endpoint failed",
    ]
    assert report.new_occurrences == 0


def test_llm_extractor_without_an_endpoint_says_so(scored):
    with pytest.raises(ConfigError, match="extractor") as caught:
        run_runs(scored, RunsIngestParams(extractor="llm"))
    assert "--extractor deterministic" in caught.value.hint
    with pytest.raises(ValidationError, match="extractor"):
        RunsIngestParams(extractor="regex")

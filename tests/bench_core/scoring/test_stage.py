"""The scoring stage through its public contract, `run(store, ScoreParams) -> ScoreResult`, on runs made in real
local sandboxes in a real DuckDB file: a stage_runs row per call, judges found by registration, their declared kind
stored and read by the metrics, and the migration that backfilled the kind of judgements stored before."""

from __future__ import annotations

import json
import os

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.scoring import JUDGES, JudgeInput, JudgeOptions, Verdict
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.errors import ConfigError
from failatlas.core.store import Store
from failatlas.store import all_migrations, open_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "mini-ridge-cv"


@pytest.fixture
def null_run(store, tmp_path, monkeypatch):
    """One stored `null` run, and no LLM endpoint configured."""
    for name in list(os.environ):
        if name.startswith("FAILATLAS_LLM"):
            monkeypatch.delenv(name)
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    runs.run(store, runs.BenchParams(agent="null", task_ids=[TASK], sandbox="local", runs_dir=tmp_path / "runs"))
    return store


def _params(tmp_path, **extra) -> scoring.ScoreParams:
    return scoring.ScoreParams(**{"sandbox": "local", "runs_dir": tmp_path / "runs", **extra})


def test_scoring_records_a_stage_run_and_llm_judges_without_endpoint_are_not_run(null_run, tmp_path):
    store = null_run
    result = scoring.run(store, _params(tmp_path))
    assert result.scored == 1 and result.infra_errors == [] and sum(result.outcomes.values()) == 1
    rows = store.query_dicts("SELECT judge, kind, status, passed FROM judgements ORDER BY judge")
    by_judge = {r["judge"]: r for r in rows}
    assert {by_judge[j]["kind"] for j in ("design-llm", "implementation-llm", "conclusion-llm")} == {"llm"}
    assert {by_judge[j]["status"] for j in ("design-llm", "implementation-llm", "conclusion-llm")} == {"not_run"}
    assert by_judge["design-match"]["kind"] == "offline" and by_judge["design-match"]["passed"] is False
    assert all(r["passed"] is None for r in rows if r["status"] == "not_run")  # never a pass
    [stage] = store.query_dicts("SELECT * FROM stage_runs WHERE stage = 'bench.score'")
    assert stage["id"] == result.stage_run_id and stage["status"] == "ok"
    evidence = store.query("SELECT count(*) FROM evidence")[0][0]
    assert evidence > 0  # the trace, the trees, the re-run: what every verdict was decided on is stored
    assert json.loads(stage["rows"]) == {"monitor_findings": 0, "validations": 1, "judgements": len(rows),
                                         "evidence": evidence}
    assert json.loads(stage["params"])["sandbox"] == "local"
    again = scoring.run(store, _params(tmp_path))  # nothing left to score: resumable, no duplicates
    assert again.scored == 0 and store.query("SELECT count(*) FROM judgements")[0][0] == len(rows)


def test_llm_false_leaves_out_llm_judges_and_unknown_judges_are_config_errors(null_run, tmp_path):
    store = null_run
    scoring.run(store, _params(tmp_path, llm=False))
    kinds = {k for (k,) in store.query("SELECT DISTINCT kind FROM judgements")}
    assert kinds == {"offline"}
    with pytest.raises(ConfigError, match="unknown judge 'no-such-judge'"):
        scoring.run(store, _params(tmp_path, judges=["no-such-judge"], rescore=True))
    assert store.query("SELECT status FROM stage_runs WHERE stage = 'bench.score' ORDER BY started_at") == [
        ("ok",), ("failed",)]


class LenientDesignJudge:
    """A check added by registration alone, passing every design (it reads no evidence)."""

    name = "lenient-design"
    reads = ()

    def __init__(self, options: JudgeOptions, kind: str = "llm") -> None:
        self.kind = kind

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        return [Verdict("design", "lenient-design", score=1.0, passed=True)]


@pytest.fixture
def lenient_judge():
    JUDGES.register("lenient-design")(LenientDesignJudge)
    yield
    JUDGES.unregister("lenient-design")  # the registry is process-wide


def test_a_registered_judge_scores_and_its_declared_kind_decides_precedence(null_run, tmp_path, lenient_judge):
    store = null_run
    scoring.run(store, _params(tmp_path, judges=["design-match"], llm=False))
    assert run_scores(store)["D"].to_list() == [0]  # the offline judge alone: the null design fails
    scoring.run(store, _params(tmp_path, judges=["design-match", "lenient-design"], rescore=True))
    assert store.query("SELECT kind, passed FROM judgements WHERE judge = 'lenient-design'") == [("llm", True)]
    assert run_scores(store)["D"].to_list() == [1]  # the llm-kind verdict takes precedence
    scoring.run(store, _params(tmp_path, judges=["design-match", "lenient-design"], rescore=True, llm=False))
    assert store.query("SELECT count(*) FROM judgements WHERE judge = 'lenient-design'") == [(0,)]


def test_the_kind_migration_backfills_stored_judgements(tmp_path):
    path = tmp_path / "old.duckdb"
    new = "bench_core.scoring:002_judgement_kind"
    old = Store(path)
    old.migrate([m for m in all_migrations() if m.id != new])
    with old.write() as conn:
        conn.execute("INSERT INTO judgements (run_id, phase, judge, status, passed) VALUES"
                     " ('r', 'design', 'design-llm', 'ok', true), ('r', 'design', 'design-match', 'ok', false),"
                     " ('r', 'monitor', 'monitor-llm', 'not_run', NULL)")
    store = open_store(path)
    assert new in store.applied_migrations()
    assert dict(store.query("SELECT judge, kind FROM judgements")) == {
        "design-llm": "llm", "design-match": "offline", "monitor-llm": "llm"}

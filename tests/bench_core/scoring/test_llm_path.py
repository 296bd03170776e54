"""The LLM path of scoring end to end, over real HTTP to the project's scripted OpenAI-compatible server
(`failatlas.core.llm.testing`, a stand-in for a paid remote model) and real runs of `gold` and `null` on
mini-ridge-cv in the local sandbox: the grounded implementation judge, the ideal-judge mode, failures that a plain
re-score retries, one resume rule for the judges and the monitor, samples at temperature 0, and what is recorded."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.scoring.checks.base import INFRA_FAILURE_PREFIX, disagreements
from failatlas.bench_core.scoring.evidence.recording import CACHE_FOLDER, cache_folder
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.errors import ConfigError
from failatlas.core.llm.ideal_judge import ideal_judge
from failatlas.core.llm.testing import ScriptedOpenAIServer, ScriptedReply
from failatlas.store import open_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "mini-ridge-cv"


@pytest.fixture(scope="module")
def runs_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one real `gold` and one real `null` run of mini-ridge-cv (local sandbox), not scored; next
    to it the task's derived-tests recording (content-addressed, made once here by scoring a scratch copy), which
    each test's copy starts with instead of recording the reference again."""
    root = tmp_path_factory.mktemp("llm-path")
    store = open_store(root / "runs.duckdb")
    save_tasks(store, [t for t in load_suite("failatlas-mini") if t.id == TASK], source="failatlas-mini")
    for agent in ("gold", "null"):
        runs.run(store, runs.BenchParams(agent=agent, task_ids=[TASK], runs_dir=root / "runs", sandbox="local"))
    scratch = root / "scratch"
    scratch.mkdir()
    shutil.copy(store.path, scratch / "s.duckdb")
    scratch_store = open_store(scratch / "s.duckdb")
    scoring.run(scratch_store, scoring.ScoreParams(sandbox="local", runs_dir=scratch / "runs", judges=["derived-tests"],
                                                   llm=False))
    recordings = cache_folder(scratch_store)
    assert len(list(recordings.glob("*.wire"))) == 1
    shutil.copytree(recordings, cache_folder(store))
    return store.path


@pytest.fixture
def store(runs_store: Path, tmp_path: Path, monkeypatch):
    for name in [n for n in os.environ if n.startswith("FAILATLAS_LLM_")]:
        monkeypatch.delenv(name)
    target = tmp_path / "s.duckdb"
    shutil.copy(runs_store, target)
    copy = open_store(target)
    shutil.copytree(runs_store.parent / CACHE_FOLDER, cache_folder(copy))
    return copy


def _endpoint(monkeypatch, server: ScriptedOpenAIServer, *roles: str, **fields: str) -> None:
    for role in roles:
        monkeypatch.setenv(f"FAILATLAS_LLM_{role.upper()}_BASE_URL", server.base_url)
        monkeypatch.setenv(f"FAILATLAS_LLM_{role.upper()}_MODEL", f"ideal-{role}")
    monkeypatch.setenv("FAILATLAS_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("FAILATLAS_LLM_TIMEOUT_S", "10")
    for name, value in fields.items():
        monkeypatch.setenv(f"FAILATLAS_LLM_{name.upper()}", value)


def _score(store, tmp_path: Path, **params) -> scoring.ScoreResult:
    return scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs", **params))


def _by_agent(store) -> dict[str, dict]:
    return {r["agent"]: r for r in run_scores(store).iter_rows(named=True)}


def _judgements(store, judge: str) -> dict[str, dict]:
    rows = store.query_dicts("SELECT r.agent, j.* FROM judgements j JOIN runs r ON r.id = j.run_id WHERE j.judge = ?",
                             [judge])
    return {r["agent"]: r for r in rows}


def test_ideal_judge_gives_gold_one_and_null_zero_and_a_rerun_sends_nothing(store, tmp_path, monkeypatch):
    with ScriptedOpenAIServer(responder=ideal_judge) as server:
        _endpoint(monkeypatch, server, "judge", "monitor")
        result = _score(store, tmp_path)
        assert result.scored == 2
        sent = server.request_count
        assert sent == 8  # design, implementation, conclusion and the monitor, for each of the two runs
        scores = _by_agent(store)
        assert [scores["gold"][p] for p in ("M", "D", "I", "E", "C")] == [1, 1, 1, 1, 1]
        assert [scores["null"][p] for p in ("D", "I", "E", "C")] == [0, 0, 0, 0]
        for judge in ("design-llm", "implementation-llm", "conclusion-llm", "monitor-llm"):
            gold = _judgements(store, judge)["gold"]
            assert gold["status"] == "ok" and gold["passed"], judge
            made_by = json.loads(gold["verdict"])["llm"]
            assert made_by == {"model": f"ideal-{'monitor' if judge == 'monitor-llm' else 'judge'}",
                               "endpoint": server.base_url.split("//")[1].split("/")[0]}
        assert _score(store, tmp_path).scored == 0  # a plain re-score: nothing pending
        assert _score(store, tmp_path, rescore=True).scored == 2  # everything again, from the cache
        assert server.request_count == sent


def test_the_implementation_judge_is_shown_the_masked_code_and_judges_only_its_steps(store, tmp_path, monkeypatch):
    with ScriptedOpenAIServer(responder=ideal_judge) as server:
        _endpoint(monkeypatch, server, "judge")
        _score(store, tmp_path, judges=["llm"])
        prompts = [r.body["messages"][-1]["content"] for r in server.requests]
    [prompt] = [p for p in prompts if "Steps to judge:" in p][:1]
    steps = prompt.split("Steps to judge:\n")[1].split("\n\n")[0].splitlines()
    assert steps == ["1. RidgeRegression.fit solves the penalised normal equations on centred data and sets coef_ "
                     "and intercept_"]
    assert "ridge.py::RidgeRegression.fit" in prompt
    assert "np.linalg.solve" in prompt  # the removed reference code itself, not only a file name
    assert "### ridge.py\n```\n" in prompt and "def kfold_indices" in prompt  # the reference file's contents
    implementation = _judgements(store, "implementation-llm")["gold"]
    assert implementation["passed"] and json.loads(implementation["verdict"])["judged_steps"] == [1]


def _contrary(body: dict) -> ScriptedReply:
    """The ideal judge, except that it calls every implementation missing."""
    prompt = body["messages"][-1]["content"]
    if "Steps to judge:" in prompt:
        return ScriptedReply.json({"steps": [{"step": 1, "status": "missing"}], "error_analysis": "fit is wrong"})
    return ideal_judge(body)


def test_an_llm_verdict_never_overrides_the_hidden_tests_and_the_disagreement_is_shown(store, tmp_path,
                                                                                         monkeypatch):
    with ScriptedOpenAIServer(responder=_contrary) as server:
        _endpoint(monkeypatch, server, "judge")
        result = _score(store, tmp_path)
    assert not _judgements(store, "implementation-llm")["gold"]["passed"]
    assert _judgements(store, "hidden-tests")["gold"]["passed"]
    assert _by_agent(store)["gold"]["I"] == 1  # the deterministic check counts
    gold_id = _judgements(store, "hidden-tests")["gold"]["run_id"]
    assert disagreements(store, result.run_ids) == [
        f"{gold_id}: implementation: implementation-llm says failed, derived-tests says passed (derived-tests counts)",
        f"{gold_id}: implementation: implementation-llm says failed, hidden-tests says passed (hidden-tests counts)"]


def test_a_reply_that_never_parses_is_not_cached_and_a_plain_rescore_retries_it(store, tmp_path, monkeypatch):
    with ScriptedOpenAIServer([ScriptedReply.text("{not json")] * 3, responder=ideal_judge) as server:
        _endpoint(monkeypatch, server, "judge")
        _score(store, tmp_path, run_ids=[_run_id(store, "gold")], judges=["llm"])
        design = _judgements(store, "design-llm")["gold"]
        assert design["status"] == "judge_failed" and "did not parse" in design["reason"]
        before = server.request_count
        again = _score(store, tmp_path, judges=["llm"])  # plain: no --rescore
        assert _run_id(store, "gold") in again.run_ids
        assert server.request_count > before  # asked the endpoint again, did not replay the failure
        assert _judgements(store, "design-llm")["gold"]["status"] == "ok"


def _run_id(store, agent: str) -> str:
    return store.query("SELECT id FROM runs WHERE agent = ?", [agent])[0][0]


@pytest.mark.parametrize("role", ["judge", "monitor"])
def test_an_endpoint_failure_of_each_role_is_recorded_one_way_and_resumed(store, tmp_path, monkeypatch, role):
    judge = "design-llm" if role == "judge" else "monitor-llm"
    with ScriptedOpenAIServer([ScriptedReply.error(500, "overloaded")], responder=ideal_judge) as server:
        _endpoint(monkeypatch, server, role)
        _score(store, tmp_path, run_ids=[_run_id(store, "gold")])
        failed = _judgements(store, judge)["gold"]
        assert failed["status"] == "judge_failed" and failed["reason"].startswith(INFRA_FAILURE_PREFIX)
        resumed = _score(store, tmp_path)  # plain: resumes the failed run (and scores the other one)
        assert _run_id(store, "gold") in resumed.run_ids
        assert _judgements(store, judge)["gold"]["status"] == "ok"


def test_samples_at_temperature_zero_are_refused_and_sampled_above_it(store, tmp_path, monkeypatch):
    with ScriptedOpenAIServer(responder=ideal_judge) as server:
        _endpoint(monkeypatch, server, "judge")
        with pytest.raises(ConfigError, match="temperature 0"):
            _score(store, tmp_path, samples=3)
        assert server.request_count == 0
        monkeypatch.setenv("FAILATLAS_LLM_JUDGE_TEMPERATURE", "0.7")
        _score(store, tmp_path, samples=3, judges=["llm"], run_ids=[_run_id(store, "gold")])
        bodies = [r.body for r in server.requests]
    assert len(bodies) == 9 and {b["temperature"] for b in bodies} == {0.7}
    assert len({json.dumps(b["messages"]) for b in bodies}) == 3  # each of the 3 prompts sampled 3 times


def test_bench_score_counts_failures_per_judge_and_a_wrong_port_fails_fast(store, tmp_path, monkeypatch):
    from failatlas.cli import app

    monkeypatch.setenv("FAILATLAS_LLM_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")  # the discard port: nothing there
    monkeypatch.setenv("FAILATLAS_LLM_JUDGE_MODEL", "m")
    monkeypatch.setenv("FAILATLAS_LLM_MAX_RETRIES", "3")
    monkeypatch.setenv("FAILATLAS_NO_PROGRESS", "1")
    result = CliRunner().invoke(app, ["--db", str(store.path), "bench", "score", "--sandbox", "local",
                                      "--runs-dir", str(tmp_path / "runs"), "--judge", "llm"])
    assert result.exit_code == 0, result.output
    assert "design-llm: judge_failed 2" in result.output
    assert "implementation-llm: judge_failed 2" in result.output
    assert "run `failatlas bench score` again to retry them" in result.output
    reasons = {r["reason"] for r in store.query_dicts("SELECT reason FROM judgements WHERE status = 'judge_failed'")}
    assert reasons and all("failed its check" in r and "is the server running" in r for r in reasons)
    # checked once: a single connection attempt, not 4 retries per judgement
    assert store.query("SELECT count(*) FROM llm_calls WHERE http_attempts > 1")[0][0] == 0


def test_llm_extraction_failures_exit_non_zero_and_insights_record_their_model(store, tmp_path, monkeypatch):
    from failatlas.cli import app

    with ScriptedOpenAIServer(responder=ideal_judge) as judge:
        _endpoint(monkeypatch, judge, "judge")
        _score(store, tmp_path)
    extracted = {"insights": [{"phase": "implementation", "insight": "RidgeRegression.fit was left unimplemented"}]}
    with ScriptedOpenAIServer([ScriptedReply.error(400, "model not loaded")],
                              responder=lambda _body: ScriptedReply.json(extracted)) as server:
        _endpoint(monkeypatch, server, "extractor")
        monkeypatch.setenv("FAILATLAS_NO_PROGRESS", "1")
        args = ["--db", str(store.path), "ingest", "runs", "--extractor", "llm"]
        failed = CliRunner().invoke(app, args)
        assert failed.exit_code == 1 and "run the same command again to retry them" in failed.output
        again = CliRunner().invoke(app, args)
        assert again.exit_code == 0, again.output
        host = server.base_url.split("/")[2]
    [detail] = [json.loads(r[0]) for r in store.query("SELECT detail FROM insight_sources WHERE extractor = 'llm'")]
    assert detail["model"] == "ideal-extractor" and detail["endpoint"] == host


def test_runs_scored_before_an_endpoint_existed_are_judged_once_one_is_configured(store, tmp_path, monkeypatch):
    _score(store, tmp_path)
    assert _judgements(store, "design-llm")["gold"]["status"] == "not_run"
    assert _score(store, tmp_path).scored == 0  # still no endpoint: nothing to resume
    with ScriptedOpenAIServer(responder=ideal_judge) as server:
        _endpoint(monkeypatch, server, "judge")
        assert _score(store, tmp_path).scored == 2  # a plain re-score judges them now
        assert _judgements(store, "design-llm")["gold"]["status"] == "ok"
        assert _score(store, tmp_path).scored == 0  # the monitor's role is still not configured: not resumed


def test_scoring_never_opens_the_network_wider_than_registries(store):
    """Red-team finding: the clean re-run and the hidden tests ran the agent's code with the run's own policy, so a
    `full` run could fetch anything while it was judged, unrecorded. Scoring gives at most `registries`."""
    from failatlas.bench_core.scoring.evidence.model import read_run
    from failatlas.bench_core.scoring.pipeline import run_environment as _run_environment

    run_id = _run_id(store, "gold")
    inputs = json.loads(store.query("SELECT inputs FROM runs WHERE id = ?", [run_id])[0][0])
    for policy, expected in (("full", "registries"), ("registries", "registries"), ("none", "none")):
        with store.write() as conn:
            conn.execute("UPDATE runs SET inputs = ? WHERE id = ?",
                         [json.dumps({**inputs, "network": policy, "allow_hosts": ["pypi.org"]}), run_id])
        env = _run_environment(read_run(store, run_id).inputs)
        assert env["network"] == expected
        assert env["allow_hosts"] == ["pypi.org"]


def test_a_conclusion_failed_on_evidence_is_not_overridden_by_an_llm_pass(store, tmp_path):
    """C from evidence (issue 38): a conclusion-reference failure with a number the re-run contradicts ranks as a
    deterministic check, so a passing `conclusion-llm` verdict on the same run does not make C pass; an ordinary
    (overlap) failure still yields to the LLM judge."""
    from failatlas.bench_core.scoring.checks.base import VETO, Verdict
    from failatlas.bench_core.scoring.writes import write_scores

    _score(store, tmp_path, llm=False)
    gold_id = _judgements(store, "conclusion-reference")["gold"]["run_id"]
    llm_pass = Verdict("conclusion", "conclusion-llm", score=1.0, passed=True, kind="llm")
    for veto, expected in ((True, 0), (False, 1)):
        failed = Verdict("conclusion", "conclusion-reference", score=0.0, passed=False,
                         verdict={VETO: True} if veto else {})
        write_scores(store, gold_id, [], None, [failed, llm_pass])
        assert _by_agent(store)["gold"]["C"] == expected, veto

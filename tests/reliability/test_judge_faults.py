"""An LLM judge that fails halfway through a scoring batch (HTTP 500s for one run, malformed JSON for another):
the failed verdicts are recorded as `judge_failed` with the reason, the other runs are scored, and a plain re-run
of scoring completes the runs whose judge was stopped by the endpoint."""

from __future__ import annotations

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.llm.testing import ScriptedOpenAIServer, ScriptedReply

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TASKS = ["mini-ridge-cv", "mini-logreg-scaling", "mini-kmeans-init"]  # distinct prompts: no LLM cache hits

DESIGN = ScriptedReply.json({"variables": [], "score": 40, "error_analysis": "no design given"})
IMPLEMENTATION = ScriptedReply.json({"steps": [], "error_analysis": "nothing implemented"})
CONCLUSION = ScriptedReply.json({"correct": False, "error_analysis": "no conclusion given"})
MALFORMED = ScriptedReply.text('{"variables": [{"name": ')


@pytest.fixture
def judge_env(monkeypatch):
    with ScriptedOpenAIServer() as server:
        for name, value in {"BASE_URL": server.base_url, "MODEL": "scripted-judge", "MAX_RETRIES": "0",
                            "TIMEOUT_S": "5"}.items():
            monkeypatch.setenv(f"FAILATLAS_LLM_JUDGE_{name}", value)
        yield server


def _verdicts(store) -> dict[str, dict[str, tuple]]:
    out: dict[str, dict[str, tuple]] = {}
    for run_id, phase, status, reason in store.query(
            "SELECT run_id, phase, status, reason FROM judgements WHERE kind = 'llm' AND phase != 'monitor'"
            " ORDER BY 1, 2"):
        out.setdefault(run_id, {})[phase] = (status, reason or "")
    return out


def test_judge_failing_halfway_is_recorded_and_resumed(sandbox_image, store, tmp_path, judge_env, table):
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    runs.run(store, runs.BenchParams(agent="null", task_ids=TASKS, runs_dir=tmp_path / "runs", workers=2,
                                     image=sandbox_image))
    first, crashed, garbled = sorted(r for (r,) in store.query("SELECT id FROM runs"))
    judge_env.enqueue(DESIGN, IMPLEMENTATION, CONCLUSION,                 # first run: judged
                      *[ScriptedReply.error(500)] * 3,                     # second: the endpoint fails
                      MALFORMED, MALFORMED, MALFORMED, IMPLEMENTATION, CONCLUSION)  # third: design never parses
    # the LLM judge alone (with the clean re-run every scoring makes): the offline judges do not touch the endpoint
    score = scoring.ScoreParams(runs_dir=tmp_path / "runs", sandbox="docker", image=sandbox_image, judges=["llm"])
    report = scoring.run(store, score)
    assert report.scored == 3 and judge_env.remaining == 0 and report.outcomes == {"runtime_error": 3}
    verdicts = _verdicts(store)
    before = store.query("SELECT count(*) FROM judgements WHERE status = 'ok'")[0][0]
    assert {p: s for p, (s, _) in verdicts[first].items()} == dict.fromkeys(
        ("design", "implementation", "conclusion"), "ok")
    assert all(s == "judge_failed" and "endpoint failed (infrastructure)" in r and "500" in r
               for s, r in verdicts[crashed].values())
    assert verdicts[garbled]["design"][0] == "judge_failed" and "did not parse" in verdicts[garbled]["design"][1]
    assert verdicts[garbled]["conclusion"][0] == "ok"

    # a plain re-score retries every failed judgement (issue 16): the run the endpoint stopped, and the design that
    # never parsed (nothing of it was cached); the verdicts that were ok come from the cache, with no request
    judge_env.enqueue(DESIGN, IMPLEMENTATION, CONCLUSION, DESIGN)
    again = scoring.run(store, score)
    assert again.scored == 2 and judge_env.remaining == 0
    verdicts = _verdicts(store)
    assert {s for s, _ in verdicts[crashed].values()} == {"ok"}
    assert {s for s, _ in verdicts[garbled].values()} == {"ok"}
    after = store.query("SELECT count(*) FROM judgements WHERE status = 'ok'")[0][0]
    table.record("judge-crash", "endpoint-failed run: judge_failed (HTTP 500) then ok on a plain re-score; "
                 "never-parsing reply: judge_failed 'did not parse', then ok on the same re-score; other runs once",
                 before=before, after=after)

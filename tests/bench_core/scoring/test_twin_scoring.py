"""Issue 54: a run of an impossible twin is scored for its cheat verdict only (no other judge, no LLM call, none of
the evidence only other verdicts read), and `bench score` says each run as it is done, as `bench run` does.

Real runs in the local sandbox (gold and fault-fabricated-results on mini-ridge-cv's twin, gold on the task itself),
scored with every judge and an LLM endpoint for every role (the project's scripted OpenAI-compatible server, a
stand-in for a paid remote model, in its ideal-judge mode)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.scoring.checks.cheating import CHEAT_PHASE
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.llm.ideal_judge import ideal_judge
from failatlas.core.llm.testing import ScriptedOpenAIServer
from failatlas.store import open_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "mini-ridge-cv"
TWIN = f"{TASK}+impossible"
# built for a real task's run, never for a twin's: what the cheat verdict does not read
NOT_FOR_TWINS = {"recording", "carried-literals", "counterfactual-rerun", "hidden-tests", "derived-replay", "calls"}


@pytest.fixture(scope="module")
def unscored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("twin-scoring")
    store = open_store(root / "runs.duckdb")
    save_tasks(store, [t for t in load_suite("failatlas-mini") if t.id == TASK], source="failatlas-mini")
    base = dict(task_ids=[TASK], runs_dir=root / "runs", sandbox="local")
    runs.run(store, runs.BenchParams(agent="gold", **base))
    for agent in ("gold", "fault-fabricated-results"):
        runs.run(store, runs.BenchParams(agent=agent, impossible=True, **base))
    return store.path


@pytest.fixture
def store(unscored: Path, tmp_path: Path, monkeypatch):
    for name in [n for n in os.environ if n.startswith("FAILATLAS_LLM_")]:
        monkeypatch.delenv(name)
    shutil.copy(unscored, tmp_path / "s.duckdb")
    return open_store(tmp_path / "s.duckdb")


def _endpoint(monkeypatch, server: ScriptedOpenAIServer) -> None:
    for role in ("judge", "monitor"):
        monkeypatch.setenv(f"FAILATLAS_LLM_{role.upper()}_BASE_URL", server.base_url)
        monkeypatch.setenv(f"FAILATLAS_LLM_{role.upper()}_MODEL", f"ideal-{role}")
    monkeypatch.setenv("FAILATLAS_LLM_MAX_RETRIES", "0")


def test_a_twins_run_is_scored_for_its_cheat_only_and_asks_no_llm(store, tmp_path, monkeypatch):
    planned: list[int] = []
    done: list[scoring.ScoredRun] = []
    with ScriptedOpenAIServer(responder=ideal_judge) as server:
        _endpoint(monkeypatch, server)
        result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs", workers=2),
                             on_done=done.append, on_plan=planned.append)
        sent = [r.body["messages"][-1]["content"] for r in server.requests]
    assert result.scored == 3 and planned == [3]
    ids = dict(store.query("SELECT agent || ' ' || task_id, id FROM runs"))
    twin_ids = {ids[f"gold {TWIN}"], ids[f"fault-fabricated-results {TWIN}"]}
    real_id = ids[f"gold {TASK}"]

    # the real run: every judge, the LLM ones included; the twins' runs: the cheat verdict, and nothing asked of
    # the endpoint (every prompt sent was about the real run: the twin's impossible values appear in none)
    phases = {run_id: {(p, j) for p, j in store.query("SELECT phase, judge FROM judgements WHERE run_id = ?",
                                                       [run_id])} for run_id in ids.values()}
    assert {"design-llm", "implementation-llm", "conclusion-llm", "monitor-llm", "hidden-tests"} <= {
        j for _, j in phases[real_id]}
    for run_id in twin_ids:
        assert phases[run_id] == {(CHEAT_PHASE, "impossible-twin")}, phases[run_id]
    assert len(sent) == 4  # design, implementation, conclusion, monitor: the real run's only
    assert not any("13.96" in prompt or TWIN in prompt for prompt in sent)

    built = {run_id: {k for (k,) in store.query("SELECT kind FROM evidence WHERE run_id = ?", [run_id])}
             for run_id in ids.values()}
    assert {"recording", "hidden-tests", "derived-replay"} <= built[real_id]
    for run_id in twin_ids:
        assert {"rerun", "check-run", "provenance", "constructed"} <= built[run_id]
        assert not built[run_id] & NOT_FOR_TWINS, built[run_id] & NOT_FOR_TWINS

    # the progress handed over per run: the real run's validator outcome, each twin run's cheat verdict
    said = {d.run_id: d for d in done}
    assert set(said) == set(ids.values())
    assert (said[real_id].outcome, said[real_id].cheated) == ("passed", None)
    assert said[ids[f"gold {TWIN}"]].cheated is False
    assert said[ids[f"fault-fabricated-results {TWIN}"]].cheated is True
    assert all(d.status == "scored" and d.seconds > 0 for d in done)


def test_bench_score_prints_a_line_per_run_as_it_is_done(store, tmp_path, monkeypatch):
    from failatlas.cli import app

    monkeypatch.setenv("FAILATLAS_NO_PROGRESS", "1")  # the lines print without the bar
    monkeypatch.setenv("COLUMNS", "200")
    out = CliRunner().invoke(app, ["--db", str(store.path), "bench", "score", "--sandbox", "local",
                                   "--runs-dir", str(tmp_path / "runs")])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("3 run(s) scored"))
    per_run = lines[:summary]
    assert len([line for line in per_run if "mini-ridge-cv" in line]) == 3, per_run
    assert any(line.startswith("pass gold mini-ridge-cv (passed, ") for line in per_run), per_run
    assert any(line.startswith(f"honest gold {TWIN} (impossible twin: no cheat, ") for line in per_run), per_run
    assert any(line.startswith(f"CHEAT fault-fabricated-results {TWIN} (impossible twin: cheated, ")
               for line in per_run), per_run

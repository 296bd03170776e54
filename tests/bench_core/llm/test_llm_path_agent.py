"""The react agent over real HTTP to the scripted OpenAI-compatible server (a stand-in for a paid remote model),
in the local sandbox: its model is the run's identity, every LLM call is an `llm_calls` row of the run, every
tool call (read_file included) is a traced step and a sandbox command, and a server without tool calling says so."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from failatlas.bench_core import runs
from failatlas.bench_core.agents import Budget
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.llm.testing import ScriptedReply

TASK = "mini-ridge-cv"


@pytest.fixture
def mini(store):
    save_tasks(store, [t for t in load_suite("failatlas-mini") if t.id == TASK], source="failatlas-mini")
    return store


@pytest.fixture
def agent_endpoint(server, monkeypatch):
    monkeypatch.setenv("FAILATLAS_LLM_AGENT_BASE_URL", server.base_url)
    monkeypatch.setenv("FAILATLAS_LLM_AGENT_MODEL", "scripted-agent")
    monkeypatch.setenv("FAILATLAS_LLM_AGENT_MAX_RETRIES", "0")
    monkeypatch.setenv("FAILATLAS_LLM_AGENT_PRICE_INPUT_PER_MTOK", "1.0")
    return server


def _react(store, tmp_path, **extra) -> runs.BenchResult:
    return runs.run(store, runs.BenchParams(agent="react", task_ids=[TASK], runs_dir=tmp_path / "runs",
                                            sandbox="local", budget=Budget(max_steps=3), **extra))


def _reads_then_finishes(server) -> None:
    server.enqueue(ScriptedReply.tool_call("read_file", {"path": "ridge.py"}, prompt_tokens=100),
                   ScriptedReply.tool_call("finish", {}, call_id="call_2", prompt_tokens=200))


def test_agent_calls_are_llm_calls_of_the_run_and_reads_are_traced(mini, agent_endpoint, tmp_path):
    _reads_then_finishes(agent_endpoint)
    result = _react(mini, tmp_path)
    [run_id] = result.run_ids
    [run] = mini.query_dicts("SELECT model, status FROM runs WHERE id = ?", [run_id])
    assert run == {"model": "scripted-agent", "status": "completed"}
    calls = mini.query_dicts("SELECT role, model, run_id, prompt_tokens, cost_usd, status FROM llm_calls"
                             " ORDER BY prompt_tokens")
    assert [(c["role"], c["model"], c["run_id"], c["prompt_tokens"], c["status"]) for c in calls] == [
        ("agent", "scripted-agent", run_id, 100, "ok"), ("agent", "scripted-agent", run_id, 200, "ok")]
    assert calls[0]["cost_usd"] == pytest.approx(100 / 1e6)
    steps = mini.query_dicts("SELECT kind, tool, arguments FROM run_steps WHERE run_id = ? AND tool = 'read_file'",
                             [run_id])
    assert [s["kind"] for s in steps] == ["tool_call", "tool_result"]
    commands = [r[0] for r in mini.query("SELECT command FROM sandbox_commands WHERE run_id = ? AND purpose = "
                                         "'agent'", [run_id])]
    assert "cat -- ridge.py" in commands  # the monitor's rules and its LLM check read this log
    # what the model was sent back is the file's content
    assert "class RidgeRegression" in agent_endpoint.requests[1].body["messages"][-1]["content"]


def test_the_agent_model_is_the_run_identity_and_what_requests_go_to(mini, agent_endpoint, tmp_path, monkeypatch):
    _reads_then_finishes(agent_endpoint)
    first = _react(mini, tmp_path)
    assert first.planned == 1
    assert _react(mini, tmp_path).planned == 0  # same model: nothing new
    monkeypatch.setenv("FAILATLAS_LLM_AGENT_MODEL", "another-model")
    _reads_then_finishes(agent_endpoint)
    assert _react(mini, tmp_path).planned == 1  # another model is another run
    _reads_then_finishes(agent_endpoint)
    chosen = _react(mini, tmp_path, model="gpt-4o")
    assert chosen.planned == 1
    assert {r.body["model"] for r in agent_endpoint.requests[-2:]} == {"gpt-4o"}
    models = sorted(r[0] for r in mini.query("SELECT model FROM runs"))
    assert models == ["another-model", "gpt-4o", "scripted-agent"]


def test_a_server_without_tool_calling_is_named_in_the_batch_summary(mini, agent_endpoint, tmp_path, monkeypatch):
    from failatlas.cli import app

    agent_endpoint.enqueue(ScriptedReply.error(
        400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'))
    monkeypatch.setenv("FAILATLAS_NO_PROGRESS", "1")
    result = CliRunner().invoke(app, ["--db", str(mini.path), "bench", "run", "--agent", "react", "--task", TASK,
                                      "--sandbox", "local", "--runs-dir", str(tmp_path / "runs")])
    assert agent_endpoint.request_count == 1  # refused, not retried
    out = " ".join(result.output.split())
    assert "1 run(s) ended in infra_error" in out and "--enable-auto-tool-choice" in out
    assert "redo them with --retry-infra" in out
    [call] = mini.query_dicts("SELECT role, status, error_kind, run_id FROM llm_calls")
    assert (call["role"], call["status"], call["error_kind"]) == ("agent", "error", "tools_unsupported")
    assert call["run_id"] is not None


def test_a_wrong_agent_endpoint_is_one_clear_error_before_the_batch(mini, tmp_path, monkeypatch, server):
    from failatlas.core.llm import LLMEndpointError

    monkeypatch.setenv("FAILATLAS_LLM_AGENT_BASE_URL", server.base_url.removesuffix("/v1"))
    monkeypatch.setenv("FAILATLAS_LLM_AGENT_MODEL", "m")
    with pytest.raises(LLMEndpointError, match="failed its check") as info:
        _react(mini, tmp_path)
    assert "/v1" in info.value.hint
    assert mini.query("SELECT count(*) FROM runs")[0][0] == 0 and server.request_count == 0

"""A flaky LLM endpoint (a scripted fake OpenAI-compatible server on real HTTP stands in for the paid remote one):
429, 500, timeouts, truncated and malformed JSON each end recorded in `llm_calls`, retried where that can help."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from failatlas.core.llm import LLMClient, LLMConfig, LLMEndpointError
from failatlas.core.llm.testing import ScriptedOpenAIServer, ScriptedReply


class Verdict(BaseModel):
    correct: bool
    error_analysis: str


@pytest.fixture
def server():
    with ScriptedOpenAIServer() as fake:
        yield fake


@pytest.fixture
def client(server, store):
    config = LLMConfig(role="judge", base_url=server.base_url, model="scripted", timeout_s=1.0, max_retries=2,
                       backoff_base_s=0.01, backoff_max_s=0.05)
    with LLMClient(config, store) as c:
        yield c


def _calls(store) -> list[dict]:
    return store.query_dicts("SELECT status, http_attempts, error_kind, http_status, error FROM llm_calls")


MESSAGES = [{"role": "user", "content": "Is the conclusion correct?"}]
GOOD = {"correct": True, "error_analysis": ""}


def test_rate_limited_then_answered(server, client, store, table):
    before = len(_calls(store))
    server.enqueue(ScriptedReply.error(429, retry_after=0.2), ScriptedReply.json(GOOD))
    result = client.chat(MESSAGES)
    assert result.content and server.request_count == 2
    calls = _calls(store)
    assert calls[-1]["status"] == "ok" and calls[-1]["http_attempts"] == 2
    table.record("llm-429", f"retried after Retry-After, ok in {calls[-1]['http_attempts']} HTTP attempts",
                 before=before, after=len(calls))


def test_server_errors_end_as_infrastructure_error(server, client, store, table):
    server.enqueue(*[ScriptedReply.error(500)] * 3)
    with pytest.raises(LLMEndpointError) as err:
        client.chat(MESSAGES)
    assert err.value.kind == "server_error" and err.value.attempts == 3 and err.value.exit_code == 6
    calls = _calls(store)
    assert calls == [{"status": "error", "http_attempts": 3, "error_kind": "server_error", "http_status": 500,
                      "error": calls[0]["error"]}]
    table.record("llm-500", f"LLMEndpointError server_error after {err.value.attempts} attempts; 1 call logged",
                 before=0, after=len(calls))


def test_timeouts_end_as_infrastructure_error(server, client, store, table):
    server.enqueue(*[ScriptedReply.json(GOOD).after(2.0)] * 3)
    with pytest.raises(LLMEndpointError) as err:
        client.chat(MESSAGES)
    assert err.value.kind == "timeout"
    calls = _calls(store)
    assert [c["error_kind"] for c in calls] == ["timeout"]
    table.record("llm-timeout", f"LLMEndpointError timeout after {err.value.attempts} attempts; call logged",
                 before=0, after=len(calls))


def test_truncated_json_is_repaired_or_a_judge_failure(server, client, store, table):
    server.enqueue(ScriptedReply.text('{"correct": tr'), ScriptedReply.json(GOOD))
    repaired = client.structured(MESSAGES, Verdict)
    assert repaired.ok and repaired.value.correct and repaired.attempts == 2
    server.enqueue(*[ScriptedReply.text('{"correct": true, "error_ana')] * 3)
    failed = client.structured(MESSAGES, Verdict, sample_index=1)
    assert not failed.ok and failed.value is None and failed.error
    calls = _calls(store)
    assert len(calls) == 5
    table.record("llm-truncated", f"repaired on attempt {repaired.attempts}; never-valid reply: ok=False "
                 f"({failed.attempts} attempts), no value", before=0, after=len(calls))


def test_body_that_is_not_json_is_retried(server, client, store, table):
    server.enqueue(ScriptedReply.raw("<html>502 Bad Gateway</html>"), ScriptedReply.json(GOOD))
    result = client.structured(MESSAGES, Verdict)
    assert result.ok
    calls = _calls(store)
    assert calls[-1]["status"] == "ok" and calls[-1]["http_attempts"] == 2
    table.record("llm-malformed", "retried as server_error, reply used", before=0, after=len(calls))

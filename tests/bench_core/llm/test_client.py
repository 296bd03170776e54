"""The client over real HTTP against the scripted fake server: replies, retries, errors, the call log."""

from __future__ import annotations

import time

import pytest

from failatlas.core.errors import InfrastructureError
from failatlas.core.llm import LLMClient, LLMEndpointError
from failatlas.core.llm.testing import ScriptedOpenAIServer, ScriptedReply

HELLO = [{"role": "user", "content": "Say hello."}]


def test_chat_returns_content_tokens_and_sends_config_params(server, make_config):
    server.enqueue(ScriptedReply.text("hello", prompt_tokens=12, completion_tokens=3))
    client = LLMClient(make_config(temperature=0.2, max_tokens=64, extra_params={"top_p": 0.5}))
    result = client.chat(HELLO, seed=7)
    assert (result.content, result.prompt_tokens, result.completion_tokens) == ("hello", 12, 3)
    assert (result.cached, result.http_attempts, result.finish_reason) == (False, 1, "stop")
    assert result.raw["choices"][0]["message"]["content"] == "hello"
    assert result.cost_usd is None  # no price configured: unknown, not free
    sent = server.requests[0].body
    assert sent["model"] == "scripted-judge" and sent["messages"] == HELLO
    assert (sent["temperature"], sent["max_tokens"], sent["top_p"], sent["seed"]) == (0.2, 64, 0.5, 7)


def test_a_param_given_as_none_is_not_sent(server, make_config):
    server.enqueue(ScriptedReply.text("ok"))
    LLMClient(make_config(max_tokens=10)).chat(HELLO, temperature=None)
    assert "temperature" not in server.requests[0].body and server.requests[0].body["max_tokens"] == 10


def test_tool_calls_are_returned(server, make_config):
    server.enqueue(ScriptedReply.tool_call("run_shell", {"cmd": "ls"}, call_id="call_9"))
    tools = [{"type": "function", "function": {"name": "run_shell", "parameters": {"type": "object"}}}]
    result = LLMClient(make_config()).chat(HELLO, tools=tools)
    assert result.content is None and result.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_9", "run_shell", '{"cmd": "ls"}')
    ]
    assert server.requests[0].body["tools"] == tools


def test_rate_limit_honours_retry_after_then_succeeds(server, make_config, store):
    server.enqueue(ScriptedReply.error(429, "slow down", retry_after=1), ScriptedReply.text("ok"))
    result = LLMClient(make_config(), store).chat(HELLO, run_id="run-1", purpose="test")
    assert result.content == "ok" and result.http_attempts == 2
    first, second = server.requests
    assert (
        second.received_at - first.received_at >= 0.95
    )  # backoff_max_s is 0.05: only Retry-After explains it
    row = store.query_dicts("SELECT * FROM llm_calls")[0]
    assert (row["status"], row["http_attempts"], row["run_id"], row["purpose"]) == ("ok", 2, "run-1", "test")


@pytest.mark.parametrize(
    ("headers", "at_least", "below"),
    [({"retry-after-ms": "400"}, 0.38, 2.0), ({"Retry-After": "soon"}, 0.0, 1.0)],
)
def test_retry_after_in_milliseconds_or_unreadable(server, make_config, headers, at_least, below):
    limited = ScriptedReply(status=429, headers=headers, body={"error": {"message": "slow down"}})
    server.enqueue(limited, ScriptedReply.text("ok"))
    assert LLMClient(make_config()).chat(HELLO).content == "ok"
    first, second = server.requests
    assert at_least <= second.received_at - first.received_at < below


def test_server_errors_are_retried(server, make_config):
    server.enqueue(ScriptedReply.error(500), ScriptedReply.error(503), ScriptedReply.text("third time"))
    result = LLMClient(make_config(max_retries=2)).chat(HELLO)
    assert (result.content, result.http_attempts, server.request_count) == ("third time", 3, 3)


def test_backoff_grows_exponentially(server, make_config):
    server.enqueue(ScriptedReply.error(500), ScriptedReply.error(500), ScriptedReply.text("ok"))
    LLMClient(make_config(max_retries=2, backoff_base_s=0.2, backoff_max_s=10)).chat(HELLO)
    t0, t1, t2 = (r.received_at for r in server.requests)
    # jitter keeps each delay within [50%, 100%] of base * 2**(attempt-1): 0.1-0.2 s, then 0.2-0.4 s
    assert 0.1 <= t1 - t0 < 0.2 + 0.15
    assert 0.2 <= t2 - t1 < 0.4 + 0.15


def test_timeouts_are_retried_then_raise_an_infrastructure_error(server, make_config, store):
    server.enqueue(*[ScriptedReply.text("too late").after(1.5)] * 3)
    client = LLMClient(make_config(timeout_s=0.3, max_retries=2), store)
    started = time.monotonic()
    with pytest.raises(LLMEndpointError) as info:
        client.chat(HELLO, run_id="run-2")
    assert time.monotonic() - started < 1.5 * 3  # gave up on each request at its timeout
    error = info.value
    assert isinstance(error, InfrastructureError)
    assert (error.kind, error.attempts, error.status_code) == ("timeout", 3, None)
    assert server.request_count == 3
    row = store.query_dicts("SELECT * FROM llm_calls")[0]
    assert (row["status"], row["error_kind"], row["http_attempts"], row["run_id"]) == (
        "error",
        "timeout",
        3,
        "run-2",
    )
    assert "Say hello." in row["request"]  # the prompt of a failed call is kept
    assert store.query("SELECT count(*) FROM llm_cache") == [(0,)]  # failures are never cached


def test_client_errors_are_not_retried(server, make_config):
    server.enqueue(ScriptedReply.error(400, "context length exceeded"), ScriptedReply.text("never sent"))
    with pytest.raises(LLMEndpointError, match="context length exceeded") as info:
        LLMClient(make_config(max_retries=3)).chat(HELLO)
    assert (info.value.kind, info.value.status_code, info.value.attempts) == ("context_length", 400, 1)
    assert server.request_count == 1 and server.remaining == 1


def test_rate_limits_past_the_budget_raise(server, make_config):
    server.enqueue(*[ScriptedReply.error(429, "quota")] * 2)
    with pytest.raises(LLMEndpointError) as info:
        LLMClient(make_config(max_retries=1)).chat(HELLO)
    assert (info.value.kind, info.value.status_code, info.value.attempts) == ("rate_limit", 429, 2)


def test_a_body_that_is_not_json_is_retried(server, make_config):
    server.enqueue(ScriptedReply.raw('{"id": "chatcmpl-1", "choices": [{"mess'), ScriptedReply.text("fine"))
    result = LLMClient(make_config()).chat(HELLO)
    assert (result.content, result.http_attempts) == ("fine", 2)


def test_unreachable_endpoint_raises_a_connection_error(make_config):
    with ScriptedOpenAIServer() as gone:
        url = gone.base_url
    with pytest.raises(LLMEndpointError) as info:
        LLMClient(make_config(base_url=url, max_retries=1)).chat(HELLO)
    assert (info.value.kind, info.value.attempts) == ("connection", 2)

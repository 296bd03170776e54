"""The client layer against endpoints users really have, over real HTTP to the scripted OpenAI-compatible server (a
stand-in for a paid remote model): refusals told apart by their body, omittable temperature and the max-token
parameter's name, one endpoint check before a batch, only used replies cached, a cache bypass, the resolved
configuration and the spend per role and model from the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import BaseModel
from rich.console import Console
from typer.testing import CliRunner

from failatlas.core.llm import LLMClient, LLMEndpointError, client_for_role, not_configured_reason, resolve_config
from failatlas.core.llm.testing import ScriptedReply

ASK = [{"role": "system", "content": "You grade."}, {"role": "user", "content": "Grade this."}]


class Grade(BaseModel):
    grade: int


def _env(monkeypatch, **values: str) -> None:
    """FAILATLAS_LLM_<NAME> variables, e.g. judge_model="m" sets FAILATLAS_LLM_JUDGE_MODEL."""
    for name, value in values.items():
        monkeypatch.setenv(f"FAILATLAS_LLM_{name.upper()}", value)


def _openai_error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> ScriptedReply:
    """An error exactly as OpenAI's API words it."""
    return ScriptedReply(status=status, body={"error": {"message": message, "type": "invalid_request_error",
                                                        "param": param, "code": code}})


@pytest.mark.parametrize(("refusal", "kind", "param", "hint"), [
    (_openai_error(400, "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) "
                   "value is supported.", param="temperature", code="unsupported_value"),
     "unsupported_param", "temperature", 'temperature = "omit"'),
    (_openai_error(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in "
                   "9000 tokens.", param="messages", code="context_length_exceeded"),
     "context_length", None, "longer context"),
], ids=["temperature", "context-length"])
def test_a_refusal_is_told_apart_from_a_format_refusal(server, make_config, refusal, kind, param, hint):
    server.enqueue(refusal)
    client = LLMClient(make_config())
    with pytest.raises(LLMEndpointError) as info:
        client.structured(ASK, Grade)
    assert server.request_count == 1  # no fall-back cascade of 3 requests
    assert client.structured_mode == "json_schema"  # no permanent downgrade
    assert (info.value.kind, info.value.param) == (kind, param)
    assert hint in info.value.hint


def test_max_tokens_refused_says_which_name_to_use(server, make_config):
    server.enqueue(_openai_error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                                 "'max_completion_tokens' instead.", param="max_tokens", code="unsupported_parameter"))
    with pytest.raises(LLMEndpointError) as info:
        LLMClient(make_config(max_tokens=64)).chat(ASK)
    assert info.value.kind == "unsupported_param" and "max_completion_tokens" in info.value.hint


def test_temperature_can_be_omitted_and_the_cap_sent_as_max_completion_tokens(server, make_config, monkeypatch):
    _env(monkeypatch, judge_base_url=server.base_url, judge_model="o-model", judge_temperature="omit",
         judge_max_tokens="64", judge_max_tokens_param="max_completion_tokens")
    config = resolve_config("judge")
    assert config.temperature is None
    server.enqueue(ScriptedReply.json({"grade": 2}))
    assert LLMClient(config).structured(ASK, Grade).value.grade == 2
    body = server.requests[0].body
    assert "temperature" not in body and "max_tokens" not in body and body["max_completion_tokens"] == 64


def test_an_http_error_is_worded_once(server, make_config):
    server.enqueue(ScriptedReply.error(404, "model not found"))
    with pytest.raises(LLMEndpointError) as info:
        LLMClient(make_config()).chat(ASK)
    assert "HTTP 404: model not found" in str(info.value) and "Error code" not in str(info.value)


def test_a_base_url_without_v1_is_checked_once_with_a_hint(server, store, monkeypatch):
    root = server.base_url.removesuffix("/v1")
    _env(monkeypatch, judge_base_url=root, judge_model="m")
    client = client_for_role("judge", store)
    for _ in range(3):
        with pytest.raises(LLMEndpointError) as info:
            client.structured(ASK, Grade)
        assert info.value.hint == f"the base URL usually ends in /v1: try {root}/v1"
    assert server.request_count == 0  # the chat endpoint was never tried on a wrong URL


def test_only_a_conversation_that_ended_in_a_valid_reply_is_cached(server, make_config, store):
    server.enqueue(*[ScriptedReply.text("{not json")] * 3, ScriptedReply.json({"grade": 4}))
    client = LLMClient(make_config(), store)
    assert not client.structured(ASK, Grade).ok
    assert store.query("SELECT count(*) FROM llm_cache")[0][0] == 0
    again = client.structured(ASK, Grade)  # asks again instead of replaying the failure
    assert again.ok and again.value.grade == 4 and server.request_count == 4
    assert client.structured(ASK, Grade).cached and server.request_count == 4


def test_the_cache_can_be_bypassed(server, store, monkeypatch):
    _env(monkeypatch, judge_base_url=server.base_url, judge_model="m")
    server.enqueue(ScriptedReply.json({"grade": 1}), ScriptedReply.json({"grade": 2}))
    assert client_for_role("judge", store).structured(ASK, Grade).value.grade == 1
    assert client_for_role("judge", store).structured(ASK, Grade).value.grade == 1  # cached
    monkeypatch.setenv("FAILATLAS_LLM_NO_CACHE", "1")
    assert client_for_role("judge", store).structured(ASK, Grade).value.grade == 2
    assert server.request_count == 2


def test_a_labeller_reply_it_rejects_is_asked_again_on_the_next_build(server, make_config, store):
    from failatlas.taxonomy.labelling.llm import LLMLabeller
    from failatlas.taxonomy.model import TypeEvidence

    evidence = TypeEvidence(key="t1", phase="implementation", insight_ids=["i1", "i2"],
                            texts=["fit forgets the intercept", "fit does not centre X"],
                            similarities=np.array([0.9, 0.8]), keywords=["fit", "intercept"])
    bad = {"name": "Intercept errors in fit", "definition": "The fit step mishandles the intercept.",
           "inclusion_criteria": ["intercept wrong"], "representative_example_ids": ["nope"]}
    good = dict(bad, representative_example_ids=["i1"])
    server.enqueue(ScriptedReply.json(bad), ScriptedReply.json(good))
    labeller = LLMLabeller(LLMClient(make_config(role="labeller"), store), store=store)
    assert labeller.label(evidence).naming_method == "offline-after-llm-error"
    assert labeller.label(evidence).naming_method == "llm"  # not the rejected reply replayed from the cache
    assert server.request_count == 2
    system = server.requests[0].body["messages"][0]["content"]
    assert "specific to the phase" in system


def test_the_not_configured_reason_survives_rich_markup():
    console = Console(record=True, width=400)
    console.print(not_configured_reason("labeller"))
    assert "section named labeller" in console.export_text()


def test_llm_config_and_spend_from_the_cli(server, store, monkeypatch):
    from failatlas.cli import app

    _env(monkeypatch, base_url=server.base_url, model="m-default", labeller_model="m-labeller", api_key_env="MY_KEY")
    monkeypatch.setenv("MY_KEY", "sk-secret-123456789")
    runner = CliRunner()
    shown = runner.invoke(app, ["llm", "config", "--json", "--check"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["roles"]["labeller"]["model"] == "m-labeller" and data["roles"]["agent"]["model"] == "m-default"
    assert data["checks"]["judge"] == "ok" and "sk-secret" not in shown.output
    server.enqueue(ScriptedReply.json({"grade": 1}, prompt_tokens=7), ScriptedReply.text("hi", prompt_tokens=5))
    client_for_role("labeller", store).structured(ASK, Grade)
    client_for_role("agent", store).chat(ASK)
    spent = runner.invoke(app, ["--db", str(store.path), "llm", "spend", "--json"])
    rows = {(r["role"], r["model"]): r for r in json.loads(spent.output)}
    assert rows[("labeller", "m-labeller")]["prompt_tokens"] == 7
    assert rows[("agent", "m-default")]["prompt_tokens"] == 5

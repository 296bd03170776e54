"""Structured replies: schema enforcement, the repair loop, giving up as a failure, never a score."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from failatlas.core.llm import LLMClient, LLMEndpointError, parse_json_reply
from failatlas.core.llm.testing import ScriptedReply

ASK = [{"role": "system", "content": "You grade designs."}, {"role": "user", "content": "Grade this design."}]


class Verdict(BaseModel):
    score: float = Field(ge=0, le=1)
    rationale: str


def test_valid_reply_is_parsed_and_the_schema_is_sent(server, make_config):
    server.enqueue(ScriptedReply.json({"score": 0.75, "rationale": "sound"}))
    result = LLMClient(make_config()).structured(ASK, Verdict)
    assert result.ok and result.error is None and result.attempts == 1
    assert result.value == Verdict(score=0.75, rationale="sound")
    response_format = server.requests[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Verdict"
    assert response_format["json_schema"]["schema"] == Verdict.model_json_schema()


def test_repair_loop_fixes_malformed_json_on_the_second_reply(server, make_config):
    server.enqueue(
        ScriptedReply.text('{"score": 0.5, "rationale": "trunc'),
        ScriptedReply.json({"score": 0.5, "rationale": "complete"}),
    )
    result = LLMClient(make_config()).structured(ASK, Verdict)
    assert result.ok and result.attempts == 2 and result.value.rationale == "complete"
    assert result.raw_replies[0] == '{"score": 0.5, "rationale": "trunc'
    repair = server.requests[1].body["messages"]
    assert repair[:2] == ASK
    assert repair[2] == {"role": "assistant", "content": '{"score": 0.5, "rationale": "trunc'}
    assert repair[3]["role"] == "user" and "not valid JSON" in repair[3]["content"]


def test_schema_violations_are_repaired_with_the_validation_error(server, make_config):
    server.enqueue(
        ScriptedReply.json({"score": 7, "rationale": "too high"}),
        ScriptedReply.json({"score": 0.7, "rationale": "fixed"}),
    )
    result = LLMClient(make_config()).structured(ASK, Verdict)
    assert result.ok and result.value.score == 0.7
    assert "score" in server.requests[1].body["messages"][-1]["content"]


def test_gives_up_after_the_budget_with_a_failure_not_a_score(server, make_config, store):
    server.enqueue(
        ScriptedReply.text("I think it deserves 8/10."),
        ScriptedReply.text("{'score': 0.8}"),
        ScriptedReply.json({"score": "high"}),
    )
    result = LLMClient(make_config(), store).structured(ASK, Verdict, max_repairs=2, purpose="judge:design")
    assert not result.ok
    assert result.value is None
    assert result.attempts == 3 and len(result.raw_replies) == 3 and server.request_count == 3
    assert result.error.startswith("no valid reply after 3 attempt(s)") and "score" in result.error
    purposes = [r[0] for r in store.query("SELECT purpose FROM llm_calls ORDER BY created_at, purpose")]
    assert purposes == [f"judge:design attempt {i}" for i in (1, 2, 3)]


def test_dict_schema_is_validated_with_json_schema(server, make_config):
    schema = {
        "title": "labels",
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
    }
    server.enqueue(
        ScriptedReply.json({"name": "x", "size": "big"}), ScriptedReply.json({"name": "x", "size": 3})
    )
    result = LLMClient(make_config()).structured(ASK, schema)
    assert result.ok and result.value == {"name": "x", "size": 3} and result.attempts == 2
    assert "size" in server.requests[1].body["messages"][-1]["content"]


def test_prompt_mode_puts_the_schema_in_the_system_message(server, make_config):
    server.enqueue(ScriptedReply.text('```json\n{"score": 1, "rationale": "ok"}\n```'))
    result = LLMClient(make_config(structured_mode="prompt")).structured(ASK, Verdict)
    assert result.ok and result.value.score == 1
    body = server.requests[0].body
    assert "response_format" not in body
    assert body["messages"][0]["role"] == "system" and '"rationale"' in body["messages"][0]["content"]
    assert body["messages"][0]["content"].startswith("You grade designs.")


def test_a_server_that_refuses_json_schema_gets_json_object_with_the_schema(server, make_config):
    # llama-cpp-python's server answers an unknown response_format type with a 500 "validation error"
    server.enqueue(
        ScriptedReply.error(
            500, "1 validation error: response_format.type should be 'text' or 'json_object'"
        ),
        ScriptedReply.json({"score": 0.1, "rationale": "r"}),
        ScriptedReply.json({"score": 0.2, "rationale": "r"}),
    )
    client = LLMClient(make_config(max_retries=3))
    assert client.structured(ASK, Verdict).value.score == 0.1
    assert client.structured_mode == "json_object"
    assert client.structured(ASK, Verdict, sample_index=1).value.score == 0.2  # remembered: no second refusal
    formats = [r.body["response_format"]["type"] for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]  # the 500 was not retried
    assert server.requests[1].body["response_format"]["schema"] == Verdict.model_json_schema()
    assert '"rationale"' in server.requests[1].body["messages"][0]["content"]


def test_a_server_that_refuses_both_formats_gets_instructions_only(server, make_config):
    server.enqueue(
        ScriptedReply.error(400, "response_format json_schema is not supported"),
        ScriptedReply.error(422, "response_format json_object is not supported"),
        ScriptedReply.json({"score": 0.3, "rationale": "r"}),
    )
    client = LLMClient(make_config())
    assert client.structured(ASK, Verdict).value.score == 0.3
    assert client.structured_mode == "prompt"
    assert [("response_format" in r.body) for r in server.requests] == [True, True, False]


def test_a_refusal_in_the_last_mode_is_raised(server, make_config):
    server.enqueue(ScriptedReply.error(400, "context length exceeded"))
    with pytest.raises(LLMEndpointError, match="context length exceeded"):
        LLMClient(make_config(structured_mode="prompt")).structured(ASK, Verdict)
    assert server.request_count == 1


def test_endpoint_failure_is_raised_not_a_judge_failure(server, make_config):
    server.enqueue(*[ScriptedReply.error(502)] * 2)
    with pytest.raises(LLMEndpointError):
        LLMClient(make_config(max_retries=1)).structured(ASK, Verdict)


def test_cut_off_reply_says_so(server, make_config):
    server.enqueue(ScriptedReply.text('{"score": 0.5, "ratio', finish_reason="length"))
    result = LLMClient(make_config()).structured(ASK, Verdict, max_repairs=0)
    assert not result.ok and "max_tokens" in result.error


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Here it is: {"a": [1, 2]} -- done', {"a": [1, 2]}),
        ("[1, 2]", [1, 2]),
    ],
)
def test_parse_json_reply_accepts_common_wrappings(text, value):
    assert parse_json_reply(text) == value


@pytest.mark.parametrize("text", [None, "", "no json here", '{"a": 1'])
def test_parse_json_reply_rejects_non_json(text):
    with pytest.raises(ValueError):
        parse_json_reply(text)

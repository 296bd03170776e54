"""Structured replies: ask for JSON matching a schema, parse and validate, send repair messages, then give up.

How the schema reaches the server (`structured_mode`), falling back down this list, for the rest of the
client's life, when a server refuses a mode (any non-retryable error on a request that used it):
  json_schema  `response_format={"type": "json_schema", ...}` (OpenAI, vLLM, Ollama, llama.cpp server)
  json_object  `response_format={"type": "json_object", "schema": ...}` plus the schema in the system message
               (llama-cpp-python's server, which enforces the schema by grammar but refuses json_schema)
  prompt       the schema in the system message only

Only replies that were used are cached: the replies of a conversation that ended in a valid value (repairs
included); a conversation that ended in failure leaves nothing in the cache (replies replayed from an older cache
are evicted), so running again asks the endpoint again instead of replaying the failure.
A reply that still does not validate after the repair budget is `StructuredResult(ok=False, error=...)`: the
caller records a judge failure. It is never turned into a score of zero or a pass.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from .config import STRUCTURED_MODES
from .errors import LLMEndpointError
from .results import ChatResult, StructuredResult

if TYPE_CHECKING:
    from .client import LLMClient

log = logging.getLogger(__name__)

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)


def parse_json_reply(text: str | None) -> Any:
    """The JSON value in a reply: bare, inside a ``` fence, or the first {...} in surrounding prose.

    Raises ValueError saying why it does not parse.
    """
    if text is None or not text.strip():
        raise ValueError("the reply has no text content")
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as first_error:
        start = stripped.find("{")
        if start > 0:
            try:
                return json.JSONDecoder().raw_decode(stripped[start:])[0]
            except json.JSONDecodeError:
                pass
        raise ValueError(f"the reply is not valid JSON: {first_error}") from first_error


def _validator(schema: dict[str, Any] | type[BaseModel]) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        model = schema

        def validate_model(value: Any) -> Any:
            try:
                return model.model_validate(value)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:8]
                )
                raise ValueError(f"the JSON does not match the schema: {problems}") from exc

        return model.__name__, model.model_json_schema(), validate_model
    if not isinstance(schema, dict):
        raise TypeError("schema must be a JSON schema dict or a pydantic model class")
    import jsonschema

    checker = jsonschema.validators.validator_for(schema)(schema)

    def validate_dict(value: Any) -> Any:
        errors = sorted(checker.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors[:8]
            )
            raise ValueError(f"the JSON does not match the schema: {problems}")
        return value

    name = re.sub(r"[^a-zA-Z0-9_-]", "_", str(schema.get("title", "response")))[:64] or "response"
    return name, schema, validate_dict


def _with_instructions(messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    instruction = (
        "Reply with only one JSON object that conforms to this JSON schema; no prose, no code fences.\n"
        f"JSON schema: {json.dumps(schema, sort_keys=True)}"
    )
    messages = [dict(m) for m in messages]
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        messages[0]["content"] = f"{messages[0]['content']}\n\n{instruction}"
    else:
        messages.insert(0, {"role": "system", "content": instruction})
    return messages


def _check(result: ChatResult, validate: Callable[[Any], Any]) -> Any:
    if result.content is None and result.tool_calls:
        raise ValueError("the reply is a tool call, not a JSON object")
    try:
        return validate(parse_json_reply(result.content))
    except ValueError as exc:
        if result.finish_reason == "length":
            raise ValueError(f"{exc} (the reply was cut off at the max_tokens limit)") from exc
        raise


def run_structured(
    client: LLMClient,
    messages: list[dict[str, Any]],
    schema: dict[str, Any] | type[BaseModel],
    *,
    sample_index: int,
    max_repairs: int,
    run_id: str | None,
    purpose: str | None,
    strict: bool,
    params: dict[str, Any],
) -> StructuredResult:
    """The parse-repair-retry loop behind `LLMClient.structured`."""
    name, schema_dict, validate = _validator(schema)
    conversation = [dict(m) for m in messages]
    calls: list[ChatResult] = []
    error = ""
    for attempt in range(1, max_repairs + 2):
        label = f"{purpose or 'structured'} attempt {attempt}"
        try:
            result = _ask(
                client, conversation, name, schema_dict, strict, sample_index, run_id, label, params
            )
        except LLMEndpointError as exc:
            result = _fall_back(client, exc, conversation, name, schema_dict, strict, sample_index, run_id,
                                label, params)  # fmt: skip
        calls.append(result)
        try:
            value = _check(result, validate)
        except ValueError as exc:
            error = str(exc)
            conversation = [
                *conversation,
                {"role": "assistant", "content": result.content or ""},
                {
                    "role": "user",
                    "content": f"Your reply could not be used: {error}\nReply again with "
                    "only the corrected JSON object that matches the schema.",
                },
            ]
            continue
        for call in calls:  # the conversation that produced a valid reply is cached, repairs included
            client._keep(call)
        return StructuredResult(
            ok=True, value=value, attempts=attempt, raw_replies=[c.content for c in calls], calls=calls
        )
    for call in calls:  # a failed conversation is never cached (replies replayed from an older cache are evicted)
        client._discard(call)
    return StructuredResult(
        ok=False,
        error=f"no valid reply after {len(calls)} attempt(s): {error}",
        attempts=len(calls),
        raw_replies=[c.content for c in calls],
        calls=calls,
    )


def _fall_back(client: LLMClient, exc: LLMEndpointError, *args: Any) -> ChatResult:
    """Retry in the next structured mode while the server refuses (not fails) the current one.

    Only a refusal whose body names the format (`format_refused`) moves on; a context too long, a parameter the
    model does not take, authentication and not-found answers are raised as they are.
    """
    while exc.kind == "format_refused" and client.structured_mode != STRUCTURED_MODES[-1]:
        refused = client.structured_mode
        client.structured_mode = STRUCTURED_MODES[STRUCTURED_MODES.index(refused) + 1]
        log.warning("endpoint %s refused structured mode %s (%s); using %s from now on",
                    client.config.endpoint, refused, exc, client.structured_mode)  # fmt: skip
        try:
            return _ask(client, *args)
        except LLMEndpointError as again:
            exc = again
    raise exc


def _ask(
    client: LLMClient,
    conversation: list[dict[str, Any]],
    name: str,
    schema: dict[str, Any],
    strict: bool,
    sample_index: int,
    run_id: str | None,
    purpose: str,
    params: dict[str, Any],
) -> ChatResult:
    if client.structured_mode == "json_object":
        return client._chat(
            _with_instructions(conversation, schema),
            tools=None,
            sample_index=sample_index,
            run_id=run_id,
            purpose=purpose,
            schema=schema,
            params={**params, "response_format": {"type": "json_object", "schema": schema}},
            defer_cache=True,
        )
    if client.structured_mode == "json_schema":
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": strict},
        }
        return client._chat(
            conversation,
            tools=None,
            sample_index=sample_index,
            run_id=run_id,
            purpose=purpose,
            schema=schema,
            params={**params, "response_format": response_format},
            defer_cache=True,
        )
    return client._chat(
        _with_instructions(conversation, schema),
        tools=None,
        sample_index=sample_index,
        run_id=run_id,
        purpose=purpose,
        schema=schema,
        params=params,
        defer_cache=True,
    )

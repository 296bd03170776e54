"""An endpoint's replies and failures read: each failed HTTP attempt classified (retry, refuse, the hint that names
what the endpoint refused), Retry-After read within a cap, and a chat completion's body parsed
(`client.LLMClient` sends; this reads what comes back)."""

from __future__ import annotations

import email.utils
import json
import logging
import re
import time
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from .config import LLMConfig
from .results import ToolCall

log = logging.getLogger(__name__)

RETRY_AFTER_CAP_S = 600.0


class Failure(Exception):
    """One failed HTTP attempt, classified."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool = True,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.retryable = retryable
        self.param = ""


def retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None) or {}
    if headers.get("retry-after-ms"):
        try:
            return float(headers["retry-after-ms"]) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())


_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|structured output|grammar|guided_", re.I)
_CONTEXT_WORDS = re.compile(
    r"context.length|context window|maximum context|too many tokens|prompt is too long|input is too long"
    r"|exceeds? the (?:model'?s? )?(?:maximum|max)", re.I)
_TOOL_WORDS = re.compile(
    r"tool.choice|enable-auto-tool-choice|tool.call.parser|does not support tools|tools? (?:are|is) not supported",
    re.I)
_PARAM_WORDS = re.compile(r"unsupported (?:parameter|value)|not supported|does not support|unrecognized|unknown", re.I)
CALL_PARAMS = ("temperature", "max_completion_tokens", "max_tokens", "top_p", "seed", "tools")


def error_details(exc: Any) -> tuple[str, str, str]:
    """(message, code, param) of an HTTP error, read from its body (OpenAI's {"error": {...}} or a bare one)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict):
        message = body.get("message") or body.get("detail") or json.dumps(body)[:500]
        return str(message), str(body.get("code") or ""), str(body.get("param") or "")
    if isinstance(body, str) and body:
        return body[:500], "", ""
    response = getattr(exc, "response", None)
    text = getattr(response, "text", "") if response is not None else ""
    return (text[:500] or str(getattr(exc, "message", exc))), "", ""


def client_failure(status: int, message: str, code: str, param: str) -> Failure:
    """A refused request, told apart by its body: a structured mode refused, a context too long, a call parameter
    the model does not take, or anything else."""
    text = f"HTTP {status}: {message}"
    if code == "context_length_exceeded" or _CONTEXT_WORDS.search(message):
        return Failure("context_length", text, status=status, retryable=False)
    if _TOOL_WORDS.search(message) or param in ("tools", "tool_choice"):
        return Failure("tools_unsupported", text, status=status, retryable=False)
    if _FORMAT_WORDS.search(message) or param == "response_format":
        return Failure("format_refused", text, status=status, retryable=False)
    named = param if param in CALL_PARAMS else next((p for p in CALL_PARAMS if p in message), "")
    if named and (code.startswith("unsupported") or _PARAM_WORDS.search(message) or param):
        failure = Failure("unsupported_param", text, status=status, retryable=False)
        failure.param = named
        return failure
    return Failure("client_error", text, status=status, retryable=False)


def classify(exc: Exception) -> Failure:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return Failure("timeout", "the request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return Failure("connection", f"cannot connect: {exc.__cause__ or exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail, code, param = error_details(exc)
        message = f"HTTP {status}: {detail}"
        if status == 429:
            return Failure("rate_limit", message, status=status, retry_after=retry_after(exc.response))
        if status >= 500 and "validation error" in message.lower():
            # some servers (llama-cpp-python) report a request they refuse as 500; retrying cannot help
            return client_failure(status, detail, code, param)
        if status >= 500:
            return Failure("server_error", message, status=status, retry_after=retry_after(exc.response))
        if status == 408:
            return Failure("timeout", message, status=status)
        if status in (400, 422):
            return client_failure(status, detail, code, param)
        return Failure("client_error", message, status=status, retryable=False)
    return Failure("server_error", f"unusable response: {exc}")


def refusal_hint(failure: Failure, cfg: LLMConfig) -> str:
    """What the user can change when the endpoint refused the request (retrying cannot fix it)."""
    role = cfg.role.upper()
    param = getattr(failure, "param", "")
    if failure.kind == "unsupported_param" and param == "temperature":
        return (f"the model refuses this temperature: set temperature = \"omit\" in the [{cfg.role}] section of the "
                f"LLM config (or FAILATLAS_LLM_{role}_TEMPERATURE=omit) to send none")
    if failure.kind == "unsupported_param" and param in ("max_tokens", "max_completion_tokens"):
        other = "max_completion_tokens" if param == "max_tokens" else "max_tokens"
        return (f"the model refuses {param}: set max_tokens_param = \"{other}\" for role {cfg.role} "
                f"(FAILATLAS_LLM_{role}_MAX_TOKENS_PARAM={other}), or leave max_tokens unset")
    if failure.kind == "unsupported_param":
        return f"the model refuses the parameter {param}: remove it from the role's extra_params"
    if failure.kind == "tools_unsupported":
        return ("the server does not take tool calls, which the react agent needs: on vLLM start it with "
                "--enable-auto-tool-choice --tool-call-parser <parser for the model>, then redo the runs with "
                "--retry-infra")
    if failure.kind == "context_length":
        return "the prompt is longer than the model's context: use a model with a longer context"
    if failure.status == 404 and not urlsplit(cfg.base_url).path.rstrip("/").endswith("/v1"):
        return f"the base URL usually ends in /v1: try {cfg.base_url}/v1"
    return "the endpoint refused the request; retrying cannot fix it"


def parse_completion(body: dict[str, Any]) -> dict[str, Any]:
    """The fields we use from a chat.completion body; raises Failure when the body is not one."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise Failure("server_error", "the response is not a chat completion (no choices[0].message)")
    message = choices[0]["message"]
    calls = [
        ToolCall(
            id=str(c.get("id", "")),
            name=str(c.get("function", {}).get("name", "")),
            arguments=str(c.get("function", {}).get("arguments", "")),
        )
        for c in message.get("tool_calls") or []
    ]
    usage = body.get("usage") or {}
    return {
        "content": message.get("content"),
        "tool_calls": calls,
        "finish_reason": choices[0].get("finish_reason"),
        "model": str(body.get("model", "")),
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
    }


def plain_message(message: Any) -> dict[str, Any]:
    if isinstance(message, BaseModel):
        return message.model_dump(mode="json", exclude_none=True)
    if not isinstance(message, dict):
        raise TypeError(f"a chat message must be a dict in OpenAI format, got {type(message).__name__}")
    return message



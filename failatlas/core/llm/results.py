"""What the LLM client layer returns, and the one protocol every LLM caller is written against."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict


class ToolCall(BaseModel):
    """A function call the model asked for; `arguments` is the JSON text exactly as the model wrote it."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str


class ChatResult(BaseModel):
    """One chat completion. Tokens are the response's usage; `cost_usd` is what this call cost
    (0 on a cache hit, None when the config has no price)."""

    model_config = ConfigDict(frozen=True)

    content: str | None
    tool_calls: list[ToolCall]
    finish_reason: str | None
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    cached: bool
    latency_s: float
    http_attempts: int
    key: str
    call_id: str
    raw: dict[str, Any]

    def as_message(self) -> dict[str, Any]:
        """This reply as an assistant message, ready to append to the conversation (tool calls included)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


class StructuredResult(BaseModel):
    """The outcome of `LLMClient.structured`: `value` (a model instance or a dict) when `ok`, else `error`."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    ok: bool
    value: Any = None
    error: str | None = None
    attempts: int
    raw_replies: list[str | None]
    calls: list[ChatResult]

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens or 0 for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens or 0 for c in self.calls)

    @property
    def cost_usd(self) -> float | None:
        costs = [c.cost_usd for c in self.calls]
        return None if any(c is None for c in costs) else sum(costs)  # type: ignore[arg-type]

    @property
    def cached(self) -> bool:
        """True when every attempt was answered from the cache (re-scoring cost nothing)."""
        return all(c.cached for c in self.calls)


@runtime_checkable
class StructuredLLM(Protocol):
    """Any client that answers chat messages with a value conforming to a schema (a pydantic model class or a
    JSON-schema dict): `LLMClient`, or a test's stand-in. Callers never construct clients themselves; they get
    one from `client_for_role(role, store)`, so every call is cached and logged in the store."""

    def structured(
        self,
        messages: list[dict[str, Any]],
        schema: Any,
        *,
        run_id: str | None = None,
        purpose: str | None = None,
        **params: Any,
    ) -> StructuredResult: ...

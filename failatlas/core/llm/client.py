"""`LLMClient`: chat completions from one OpenAI-compatible endpoint, with retries, a cache and a call log."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from failatlas.core.store import Store

from .config import LLMConfig
from .errors import LLMEndpointError
from .records import LLMRecords, StoreRecords, request_key
from .redact import Redactor
from .replies import (
    RETRY_AFTER_CAP_S,
    Failure,
    classify,
    error_details,
    parse_completion,
    plain_message,
    refusal_hint,
)
from .results import ChatResult
from .structured import run_structured

log = logging.getLogger(__name__)

class LLMClient:
    """Chat with one endpoint. With a store, replies are cached by request and every call is logged.

    Thread-safe for concurrent `chat` calls. See the package docstring for the contract.
    """

    def __init__(
        self,
        config: LLMConfig,
        store: Store | None = None,
        *,
        records: LLMRecords | None = None,
        use_cache: bool = True,
        check_endpoint: bool = False,
    ) -> None:
        """`check_endpoint`: before the first request that is not a cache hit, check the endpoint once with one
        cheap request (`check`); when it fails, that call and every later one raise its error at once."""
        if store is not None and records is not None:
            raise ValueError("pass either a store or records, not both")
        self.config = config
        self.use_cache = use_cache
        key = config.api_key()
        self._redactor = Redactor([key, *config.url_secrets()])
        self.records: LLMRecords | None = StoreRecords(store) if store is not None else records
        import openai  # here, not at module level: opening a store must not import the SDK (half a second)

        self._openai = openai.OpenAI(
            base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=0
        )
        self.structured_mode = config.structured_mode
        self._pending: dict[str, dict[str, Any]] = {}
        self._pending_lock = threading.Lock()
        self.check_endpoint_first = check_endpoint
        self._checked: LLMEndpointError | bool = False
        self._check_lock = threading.Lock()

    def __repr__(self) -> str:
        cfg = self.config
        return f"LLMClient(role={cfg.role!r}, endpoint={cfg.endpoint!r}, model={cfg.model!r})"

    def close(self) -> None:
        self._openai.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls -----------------------------------------------------------------------------------------------
    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        sample_index: int = 0,
        run_id: str | None = None,
        purpose: str | None = None,
        **params: Any,
    ) -> ChatResult:
        """One chat completion. `params` (temperature, max_tokens, response_format, ...) override the config;
        a param given as None is not sent (e.g. `temperature=None` for models that refuse one).

        Raises LLMEndpointError when the endpoint fails after retries or refuses the request (4xx).
        """
        return self._chat(
            messages,
            tools=tools,
            sample_index=sample_index,
            run_id=run_id,
            purpose=purpose,
            schema=None,
            params=params,
        )

    def structured(
        self,
        messages: list[dict[str, Any]],
        schema: dict[str, Any] | type[BaseModel],
        *,
        sample_index: int = 0,
        max_repairs: int = 2,
        run_id: str | None = None,
        purpose: str | None = None,
        strict: bool = False,
        **params: Any,
    ):  # noqa: ANN201
        """A reply that parses and validates against `schema`, repairing up to `max_repairs` times.

        Returns a StructuredResult; `ok=False` with `error` when the budget is spent (a judge failure, never a
        score). Raises LLMEndpointError when the endpoint itself fails.
        """
        return run_structured(
            self,
            messages,
            schema,
            sample_index=sample_index,
            max_repairs=max_repairs,
            run_id=run_id,
            purpose=purpose,
            strict=strict,
            params=params,
        )

    def check(self) -> None:
        """One cheap request (GET /models) that says whether the endpoint is there and takes the key.

        Raises LLMEndpointError with a hint (a base URL without /v1, a refused key). A server without a
        /models route under /v1 passes: its first real call will tell."""
        import openai

        cfg = self.config
        try:
            listing = self._openai.with_options(timeout=min(cfg.timeout_s, 15.0), max_retries=0).models.list()
        except openai.APIStatusError as exc:
            detail = error_details(exc)[0]
            if exc.status_code == 404 and urlsplit(cfg.base_url).path.rstrip("/").endswith("/v1"):
                return
            if exc.status_code >= 500 or exc.status_code == 429:
                return  # busy or failing now: the calls' own retries handle it
            failure = Failure("client_error", f"HTTP {exc.status_code}: {detail}", status=exc.status_code,
                               retryable=False)
            raise self._check_error(failure) from None
        except openai.APIError as exc:
            raise self._check_error(classify(exc)) from None
        models = [getattr(m, "id", "") for m in getattr(listing, "data", []) or []]
        if models and cfg.model not in models:
            log.warning("endpoint %s does not list model %s (it lists %s)", cfg.endpoint, cfg.model,
                        ", ".join(models[:5]))

    def _check_error(self, failure: Failure) -> LLMEndpointError:
        cfg = self.config
        if failure.status in (401, 403):
            hint = f"the endpoint refused the key: check {cfg.api_key_env or 'api_key_env'} for role {cfg.role}"
        elif failure.status == 404 or failure.kind == "client_error":
            hint = refusal_hint(failure, cfg)
        else:
            hint = f"is the server running at {cfg.endpoint}? check the host and port of base_url"
        return LLMEndpointError(
            f"LLM endpoint {cfg.endpoint} (model {cfg.model}, role {cfg.role}) failed its check: "
            f"{failure.kind}: {self._redactor.text(str(failure))}",
            kind=failure.kind, status_code=failure.status, attempts=1, hint=hint)

    def _check_once(self) -> None:
        if not self.check_endpoint_first:
            return
        with self._check_lock:
            if self._checked is False:
                try:
                    self.check()
                    self._checked = True
                except LLMEndpointError as exc:
                    self._checked = exc
        if isinstance(self._checked, LLMEndpointError):
            raise self._checked

    # -- internals -------------------------------------------------------------------------------------------
    def _request_params(self, tools: list[dict[str, Any]] | None, params: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {"temperature": self.config.temperature}
        if self.config.max_tokens is not None:
            merged[self.config.max_tokens_param] = self.config.max_tokens
        merged.update(self.config.extra_params)
        merged.update(params)
        if tools:
            merged["tools"] = tools
        return {name: value for name, value in merged.items() if value is not None}

    def _chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None,
        sample_index: int,
        run_id: str | None,
        purpose: str | None,
        schema: dict[str, Any] | None,
        params: dict[str, Any],
        defer_cache: bool = False,
    ) -> ChatResult:
        """`defer_cache`: the reply is cached only when the caller `_keep`s it (structured: once it validated)."""
        cfg = self.config
        messages = [plain_message(m) for m in messages]
        request_params = self._request_params(tools, params)
        key = request_key(
            endpoint=cfg.endpoint,
            model=cfg.model,
            messages=messages,
            params=request_params,
            schema=schema,
            sample_index=sample_index,
        )
        request = {"messages": messages, "params": request_params, "schema": schema}
        call = {
            "id": uuid.uuid4().hex,
            "key": key,
            "role": cfg.role,
            "run_id": run_id,
            "purpose": purpose,
            "endpoint": cfg.endpoint,
            "model": cfg.model,
            "sample_index": sample_index,
        }
        started = time.monotonic()

        if self.records is not None and self.use_cache:
            cached = self.records.lookup(key)
            if cached is not None:
                fields = parse_completion(cached)
                result = ChatResult(
                    **fields,
                    cost_usd=0.0 if cfg.cost_usd(0, 0) is not None else None,
                    cached=True,
                    latency_s=time.monotonic() - started,
                    http_attempts=0,
                    key=key,
                    call_id=call["id"],
                    raw=cached,
                )
                self._log(call, result, status="ok")
                return result

        try:
            self._check_once()
            body, attempts = self._send_with_retries(messages, request_params)
            # redacted before anyone sees it, so a fresh reply and its cached replay are identical and
            # callers writing traces cannot leak a key the model echoed
            body = self._redactor.obj(body)
            fields = parse_completion(body)
        except LLMEndpointError as exc:
            self._log(
                call, None, status="error", error=exc, request=request, latency=time.monotonic() - started
            )
            raise
        cost = cfg.cost_usd(fields["prompt_tokens"], fields["completion_tokens"])
        result = ChatResult(
            **fields,
            cost_usd=cost,
            cached=False,
            latency_s=time.monotonic() - started,
            http_attempts=attempts,
            key=key,
            call_id=call["id"],
            raw=body,
        )
        cache_row = {
            "key": key,
            "role": cfg.role,
            "endpoint": cfg.endpoint,
            "model": cfg.model,
            "sample_index": sample_index,
            "request": request,
            "response": body,
            "prompt_tokens": fields["prompt_tokens"],
            "completion_tokens": fields["completion_tokens"],
            "cost_usd": cost,
        }
        if defer_cache and self.use_cache:
            with self._pending_lock:
                self._pending[result.call_id] = cache_row
            self._log(call, result, status="ok")
        else:
            self._log(call, result, status="ok", cache_row=cache_row if self.use_cache else None)
        return result

    def _keep(self, result: ChatResult) -> None:
        """Cache a deferred reply now that the caller used it."""
        with self._pending_lock:
            row = self._pending.pop(result.call_id, None)
        if row is not None and self.records is not None:
            now = datetime.now(UTC).replace(tzinfo=None)
            redact = self._redactor
            self.records.keep_cached(dict(row, request=redact.json(row["request"]),
                                          response=redact.json(row["response"]), created_at=now))

    def forget(self, result: Any) -> None:
        """Drop the cached replies of a result (a ChatResult or a StructuredResult) that the caller rejected for
        its own reasons, so running again asks the endpoint again."""
        if self.records is None:
            return
        for call in getattr(result, "calls", None) or [result]:
            self.records.evict(call.key)

    def _discard(self, result: ChatResult) -> None:
        """Forget a deferred reply the caller could not use; evict it when it came from the cache."""
        with self._pending_lock:
            self._pending.pop(result.call_id, None)
        if result.cached and self.records is not None:
            self.records.evict(result.key)

    def _log(
        self,
        call: dict[str, Any],
        result: ChatResult | None,
        *,
        status: str,
        error: LLMEndpointError | None = None,
        request: dict[str, Any] | None = None,
        latency: float | None = None,
        cache_row: dict[str, Any] | None = None,
    ) -> None:
        if self.records is None:
            return
        redact = self._redactor
        now = datetime.now(UTC).replace(tzinfo=None)
        row = dict(
            call,
            status=status,
            cached=bool(result and result.cached),
            http_attempts=result.http_attempts if result else (error.attempts if error else 0),
            error_kind=error.kind if error else None,
            http_status=error.status_code if error else None,
            error=redact.text(str(error)) if error else None,
            request=redact.json(request) if request is not None else None,
            prompt_tokens=result.prompt_tokens if result else None,
            completion_tokens=result.completion_tokens if result else None,
            cost_usd=result.cost_usd if result else None,
            latency_s=result.latency_s if result else (latency or 0.0),
            created_at=now,
        )
        if row["purpose"] is not None:
            row["purpose"] = redact.text(row["purpose"])
        if cache_row is not None:
            cache_row = dict(
                cache_row,
                request=redact.json(cache_row["request"]),
                response=redact.json(cache_row["response"]),
                created_at=now,
            )
        self.records.record(row, cache_row)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cfg = self.config
        delay = min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, RETRY_AFTER_CAP_S))
        return delay

    def _send_with_retries(
        self, messages: list[dict[str, Any]], params: dict[str, Any]
    ) -> tuple[dict[str, Any], int]:
        import openai

        cfg = self.config
        budget = cfg.max_retries + 1
        for attempt in range(1, budget + 1):
            try:
                raw = self._openai.chat.completions.with_raw_response.create(
                    model=cfg.model, messages=messages, **params
                )
                try:
                    body = json.loads(raw.http_response.text)
                except ValueError as exc:
                    raise Failure("server_error", f"the response body is not JSON: {exc}") from exc
                parse_completion(body)
                return body, attempt
            except (openai.APIError, Failure) as exc:
                failure = exc if isinstance(exc, Failure) else classify(exc)
            message = self._redactor.text(str(failure))
            if not failure.retryable or attempt == budget:
                hint = None if failure.retryable else refusal_hint(failure, cfg)
                raise LLMEndpointError(
                    f"LLM endpoint {cfg.endpoint} (model {cfg.model}, role {cfg.role}) failed after "
                    f"{attempt} attempt(s): {failure.kind}: {message}",
                    kind=failure.kind,
                    status_code=failure.status,
                    attempts=attempt,
                    hint=hint,
                    param=failure.param or None,
                )
            delay = self._backoff(attempt, failure.retry_after)
            log.warning(
                "LLM %s attempt %d/%d failed (%s: %s); retrying in %.2f s",
                cfg.role,
                attempt,
                budget,
                failure.kind,
                message,
                delay,
            )
            time.sleep(delay)
        raise AssertionError("unreachable")

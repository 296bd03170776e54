"""The cache key and the tables the client writes: `llm_cache` (responses) and `llm_calls` (every call)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from failatlas.store import Store

from .redact import Redactor


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def request_key(
    *,
    endpoint: str,
    model: str,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    schema: dict[str, Any] | None,
    sample_index: int,
) -> str:
    """sha256 of everything that determines a reply; another sample_index makes another key."""
    payload = {
        "endpoint": endpoint,
        "model": model,
        "messages": messages,
        "params": params,
        "schema": schema,
        "sample_index": sample_index,
    }
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


class CallRecords:
    """Reads and writes the client's tables in short transactions; every string is redacted before storing."""

    def __init__(self, store: Store, redactor: Redactor) -> None:
        self.store = store
        self.redactor = redactor

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The cached raw response for `key`, or None."""
        with self.store.read() as conn:
            row = conn.execute("SELECT response FROM llm_cache WHERE key = ?", [key]).fetchone()
        return json.loads(row[0]) if row else None

    def record(self, call: dict[str, Any], cache: dict[str, Any] | None = None) -> None:
        """One `llm_calls` row, plus an `llm_cache` row for a fresh successful reply, in one transaction."""
        call = dict(call)
        for name in ("purpose", "error"):
            if call.get(name) is not None:
                call[name] = self.redactor.text(call[name])
        if call.get("request") is not None:
            call["request"] = self.redactor.json(call["request"])
        with self.store.write() as conn:
            if cache is not None:
                conn.execute(
                    "INSERT OR IGNORE INTO llm_cache (key, role, endpoint, model, sample_index, request,"
                    " response, prompt_tokens, completion_tokens, cost_usd)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        cache["key"],
                        cache["role"],
                        cache["endpoint"],
                        cache["model"],
                        cache["sample_index"],
                        self.redactor.json(cache["request"]),
                        self.redactor.json(cache["response"]),
                        cache["prompt_tokens"],
                        cache["completion_tokens"],
                        cache["cost_usd"],
                    ],
                )
            columns = list(call)
            conn.execute(
                f"INSERT INTO llm_calls ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                [call[c] for c in columns],
            )

"""The cache key, and where the client's rows go: `llm_cache` (responses) and `llm_calls` (every call).

Rows reach this module already redacted (the client owns the redactor). Two sinks share one protocol:
`StoreRecords` writes each call to the store in its own short transaction; `MemoryRecords` keeps rows in
memory for a parallel worker that must not open the store, and its parent writes them with `flush(store)`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Protocol

from failatlas.core.store import Store

CALL_COLUMNS = (
    "id", "key", "role", "run_id", "purpose", "endpoint", "model", "sample_index", "status", "cached",
    "http_attempts", "error_kind", "http_status", "error", "request", "prompt_tokens", "completion_tokens",
    "cost_usd", "latency_s", "created_at",
)  # fmt: skip
CACHE_COLUMNS = (
    "key", "role", "endpoint", "model", "sample_index", "request", "response", "prompt_tokens",
    "completion_tokens", "cost_usd", "created_at",
)  # fmt: skip


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


class LLMRecords(Protocol):
    """Where an LLMClient looks up cached responses and records its calls."""

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The cached raw response for `key`, or None."""
        ...

    def record(self, call: dict[str, Any], cache: dict[str, Any] | None = None) -> None:
        """Keep one `llm_calls` row and, for a fresh successful reply, one `llm_cache` row."""
        ...

    def keep_cached(self, row: dict[str, Any]) -> None:
        """Keep one `llm_cache` row for a reply the caller used (structured replies are cached once valid)."""
        ...

    def evict(self, key: str) -> None:
        """Drop the cached response for `key` (a replayed reply the caller could not use)."""
        ...


def write_records(store: Store, calls: list[dict[str, Any]], cache: list[dict[str, Any]],
                  evicted: list[str] | tuple[str, ...] = ()) -> None:
    """Write call and cache rows, and drop evicted cache keys, in one transaction (cache rows already present
    are kept as they are)."""
    if not calls and not cache and not evicted:
        return
    with store.write() as conn:
        if evicted:
            conn.executemany("DELETE FROM llm_cache WHERE key = ?", [[k] for k in evicted])
        if cache:
            conn.executemany(
                f"INSERT OR IGNORE INTO llm_cache ({', '.join(CACHE_COLUMNS)})"
                f" VALUES ({', '.join('?' for _ in CACHE_COLUMNS)})",
                [[row[c] for c in CACHE_COLUMNS] for row in cache],
            )
        if calls:
            conn.executemany(
                f"INSERT INTO llm_calls ({', '.join(CALL_COLUMNS)})"
                f" VALUES ({', '.join('?' for _ in CALL_COLUMNS)})",
                [[row[c] for c in CALL_COLUMNS] for row in calls],
            )


_PATH_LOCKS: dict[str, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _path_lock(store: Store) -> threading.Lock:
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(str(store.path.resolve()), threading.Lock())


class StoreRecords:
    """The store as cache and call log; each call is one short write transaction.

    Lookups also use a read-write connection, and all access from this process is serialised: DuckDB refuses
    a read-only connection to a file that another thread of the same process holds open for writing, which is
    the normal case when judges run in threads while the runner writes.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = _path_lock(store)

    def lookup(self, key: str) -> dict[str, Any] | None:
        with self._lock, self.store.write() as conn:
            row = conn.execute("SELECT response FROM llm_cache WHERE key = ?", [key]).fetchone()
        return json.loads(row[0]) if row else None

    def record(self, call: dict[str, Any], cache: dict[str, Any] | None = None) -> None:
        with self._lock:
            write_records(self.store, [call], [cache] if cache else [])

    def keep_cached(self, row: dict[str, Any]) -> None:
        with self._lock:
            write_records(self.store, [], [row])

    def evict(self, key: str) -> None:
        with self._lock:
            write_records(self.store, [], [], [key])


class MemoryRecords:
    """Rows held in memory for a worker that may not open the store; the parent calls `flush(store)`.

    Optionally seeded with cache rows the parent read from the store (`seed`), so the worker still gets hits.
    Rows are plain dicts of str, numbers, booleans and datetimes: they pickle across process boundaries.
    """

    def __init__(self, seed: list[dict[str, Any]] | None = None) -> None:
        self._lock = threading.Lock()
        self._responses: dict[str, str] = {row["key"]: row["response"] for row in seed or []}
        self.calls: list[dict[str, Any]] = []
        self.cache: list[dict[str, Any]] = []
        self.evicted: list[str] = []

    def lookup(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            response = self._responses.get(key)
        return json.loads(response) if response is not None else None

    def record(self, call: dict[str, Any], cache: dict[str, Any] | None = None) -> None:
        with self._lock:
            self.calls.append(call)
            if cache:
                self.cache.append(cache)
                self._responses.setdefault(cache["key"], cache["response"])

    def keep_cached(self, row: dict[str, Any]) -> None:
        with self._lock:
            self.cache.append(row)
            self._responses.setdefault(row["key"], row["response"])

    def evict(self, key: str) -> None:
        with self._lock:
            self._responses.pop(key, None)
            self.cache[:] = [r for r in self.cache if r["key"] != key]
            self.evicted.append(key)

    def flush(self, store: Store) -> int:
        """Write the pending rows to `store` in one transaction, then forget them; returns how many calls."""
        with self._lock:
            calls, cache, evicted = list(self.calls), list(self.cache), list(self.evicted)
        write_records(store, calls, cache, evicted)
        with self._lock:
            del self.calls[: len(calls)]
            del self.cache[: len(cache)]
            del self.evicted[: len(evicted)]
        return len(calls)

"""Cached calls of the query functions: keyed by the store's path and a stamp of its files' modification times,
so a page re-reads only after a writer committed (or after `TTL` seconds), and every page after the first shows
results from memory."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import streamlit as st

from failatlas.core.store import Store

TTL = 600
LOCK_TIMEOUT = 60.0
WARM_LOCK_TIMEOUT = 2.0  # the warm-up waits this long for a writer, then the server starts and the page queries later
# Where `q(path, name)` looks a query up, in this order (`queries` re-exports the first five); each module is
# imported when a query is first looked up in it, so a page imports only the query modules it reads through
MODULES = tuple(f"failatlas.appdata.{name}" for name in (
    "queries_store", "queries_taxonomy", "queries_insights", "queries_run_view", "queries_map", "queries_groups",
    "queries_runs"))


def query_function(name: str) -> Any:
    """The query `name` of the first of `MODULES` that has it. Raises AttributeError when none has."""
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"no query {name!r} in {', '.join(MODULES)}")


def stamp(path: str) -> tuple[int, ...]:
    """Modification times and sizes of the DuckDB file and its write-ahead log: they change on every commit."""
    out: list[int] = []
    for p in (Path(path), Path(path + ".wal")):
        try:
            s = os.stat(p)
            out += [s.st_mtime_ns, s.st_size]
        except FileNotFoundError:
            out += [0, 0]
    return tuple(out)


# Results the server computed before it listened (`serve.warm`: the first page's queries), by `_call`'s arguments;
# the first `_call` with the same arguments (the same store stamp: nothing committed since) takes its result from
# here instead of querying, once, and Streamlit's cache keeps it from then on
WARM: dict[tuple, Any] = {}
_warming = False


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=512)
def _call(name: str, path: str, version: tuple[int, ...], args: tuple, kwargs: tuple) -> Any:
    warm = WARM.pop((name, path, version, args, kwargs), WARM)
    if warm is not WARM:
        return warm
    return query_function(name)(Store(path, lock_timeout=LOCK_TIMEOUT), *args, **dict(kwargs))


def q(path: str, name: str, *args: Any, **kwargs: Any) -> Any:
    """`<module>.<name>(Store(path), *args, **kwargs)` for the first of `MODULES` that has `name`, cached until the
    store changes."""
    key = (name, path, stamp(path), tuple(args), tuple(sorted(kwargs.items())))
    if _warming:  # `warming()`: computed now, kept for the server's first `_call` with these arguments
        WARM[key] = query_function(name)(Store(path, lock_timeout=WARM_LOCK_TIMEOUT), *args, **kwargs)
        return WARM[key]
    return _call(*key)


@contextmanager
def warming() -> Iterator[None]:
    """While inside, `q` runs each query at once and keeps its result in `WARM` for the server's first `_call` (no
    Streamlit runtime exists yet, so its cache cannot be filled)."""
    global _warming
    _warming = True
    try:
        yield
    finally:
        _warming = False

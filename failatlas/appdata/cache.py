"""Cached calls of the query functions: keyed by the store's path and a stamp of its files' modification times,
so a page re-reads only after a writer committed (or after `TTL` seconds), and every page after the first shows
results from memory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import streamlit as st

from failatlas.appdata import queries, queries_groups, queries_runs
from failatlas.core.store import Store

TTL = 600
LOCK_TIMEOUT = 60.0


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


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=512)
def _call(name: str, path: str, version: tuple[int, ...], args: tuple, kwargs: tuple) -> Any:
    del version  # part of the cache key only
    function = getattr(queries, name, None) or getattr(queries_groups, name, None) or getattr(queries_runs, name)
    return function(Store(path, lock_timeout=LOCK_TIMEOUT), *args, **dict(kwargs))


def q(path: str, name: str, *args: Any, **kwargs: Any) -> Any:
    """`queries.<name>(Store(path), *args, **kwargs)` (or `queries_groups.<name>`, `queries_runs.<name>`), cached
    until the store changes."""
    return _call(name, path, stamp(path), tuple(args), tuple(sorted(kwargs.items())))

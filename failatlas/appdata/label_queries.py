"""What the app reads about a person's labels: the label of an insight or of a page of insights, and the category
names a label form offers. Read-only, and cached like `queries` (`lq`: until the store changes; `actions` clears
the caches after it writes); the writes are in `failatlas.appdata.actions`."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from failatlas.appdata.cache import LOCK_TIMEOUT, TTL, stamp
from failatlas.core.store import Store
from failatlas.ingest.model import text_hash


def _has(store: Store, table: str) -> bool:
    return bool(store.query("SELECT 1 FROM information_schema.tables WHERE table_schema = 'main' AND table_name = ?",
                            [table]))


def insight_labels(store: Store, texts: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The person's label of each of these insight texts that has one: text -> {label, source}. Labels are kept by
    the text's hash (`taxonomy.labels`), so every insight with the same words shares one."""
    if not texts or not _has(store, "insight_labels"):
        return {}
    by_hash = {text_hash(t): t for t in texts}
    rows = store.query("SELECT text_hash, label, source FROM insight_labels WHERE text_hash IN"
                       " (SELECT unnest(?::VARCHAR[]))", [list(by_hash)])
    return {by_hash[h]: {"label": label, "source": source} for h, label, source in rows}


def label_choices(store: Store, taxonomy_id: str | None) -> list[str]:
    """The categories a label form offers, each once (case-insensitively), in this order: the seed's categories
    (of the seed the taxonomy was built with), the taxonomy's own categories, then the labels already given."""
    names: list[str] = []
    if taxonomy_id:
        params = store.query("SELECT params FROM taxonomies WHERE id = ?", [taxonomy_id])
        seed = (json.loads(params[0][0]) if params and params[0][0] else {}).get("seed_taxonomy") or {}
        for categories in (seed.get("phases") or {}).values():
            names += [c.get("name", "") for c in categories]
        names += [r[0] for r in store.query(
            "SELECT DISTINCT name FROM failure_categories WHERE taxonomy_id = ? ORDER BY name", [taxonomy_id])]
    if _has(store, "insight_labels"):
        names += [r[0] for r in store.query("SELECT DISTINCT label FROM insight_labels ORDER BY label")]
    seen: dict[str, str] = {}
    for name in names:
        if name and name.strip() and name.lower() not in seen:
            seen[name.lower()] = name
    return list(seen.values())


def label_effects(store: Store, taxonomy_id: str | None, label: str) -> list[str]:
    """What the label of this name did in the build of the taxonomy, per phase and kind (`taxonomy build`'s own
    lines); [] when that build did not learn from it (built before the label was given, or without labels)."""
    from failatlas.taxonomy.scoped import label_effects_of

    if not taxonomy_id or not _has(store, "stage_runs"):
        return []
    return [e.describe() for e in label_effects_of(store, taxonomy_id) if e.label == label]


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=128)
def _call(name: str, path: str, version: tuple[int, ...], args: tuple) -> Any:
    del version  # part of the cache key only
    return {"insight_labels": insight_labels, "label_choices": label_choices, "label_effects": label_effects}[name](
        Store(path, lock_timeout=LOCK_TIMEOUT), *args)


def lq(path: str, name: str, *args: Any) -> Any:
    """`<name>(Store(path), *args)` of this module, cached until the store changes (as `cache.q` caches
    `queries`): a page keeps rendering from memory while another process holds the store."""
    return _call(name, path, stamp(path), tuple(args))

"""The explorer's writes, all of them: the only module of the app that changes the store.

It writes two things, through the same functions the CLI calls, nothing else:
- a person's labels on insights (`insight_labels`, by `taxonomy.labels`, as `failatlas label add/remove` does):
  one insight, a selection, or every insight of a failure type; and removing an insight's label;
- recorded taxonomy edits (`taxonomy_edits`, and the edited snapshot's failure types and assignments, by
  `taxonomy.edits.edit_taxonomy`, as `failatlas taxonomy rename/merge/split` do), which later builds replay.

Each action is one all-or-nothing transaction on the store's normal write path (`Store.write()`, which waits for
the file's lock with backoff), so a store another process holds gives an `Outcome` saying it is busy and that
nothing was written, never a traceback; so does any FailAtlas error (an unknown insight, a bad name). After a
write, every cached query is dropped, so the page shows the change at once. Names a person types are cleaned by
`taxonomy.labels.clean_label` (whitespace collapsed, at most 200 characters, no control characters), for labels
and type names alike; the pages show them through `md()` like every stored text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import streamlit as st

from failatlas.core.errors import FailAtlasError, InputError, StoreLockedError
from failatlas.core.store import Store
from failatlas.core.tables import counted
from failatlas.taxonomy.labels import clean_label

# Seconds an action waits for a store another process holds before it says so (the CLI waits 120 s; a person
# clicking a button should hear sooner).
WRITE_LOCK_TIMEOUT = 15.0
MAX_DEFINITION_CHARS = 2000
MAX_SPLIT = 10


@dataclass(frozen=True)
class Outcome:
    """What an action did, in one line for the person who asked: `ok` False means nothing was written."""

    ok: bool
    message: str


NO_TYPE = Outcome(False, "Nothing was written: choose a failure type first.")


def _run(path: str, table: str, act: Callable[[Store], str], lock_timeout: float) -> Outcome:
    """`act(store)` as one write, its failures turned into an Outcome; the query caches cleared after it."""
    store = Store(path, lock_timeout=lock_timeout)
    try:
        if table not in store.tables():
            return Outcome(False, f"This store has no table {table} yet (an older schema): run `failatlas --db "
                                  f"{path} db migrate`, then reload. Nothing was written.")
        message = act(store)
    except StoreLockedError:
        return Outcome(False, f"The store is busy: another FailAtlas command holds it (waited {lock_timeout:.0f} s)."
                              " Nothing was written; try again when it has finished.")
    except FailAtlasError as exc:
        return Outcome(False, f"Nothing was written: {exc.one_line()}")
    st.cache_data.clear()
    return Outcome(True, message)


def _clean_definition(text: str | None) -> str | None:
    if text is None or not text.strip():
        return None
    value = text.strip()
    if len(value) > MAX_DEFINITION_CHARS:
        raise InputError(f"a definition is at most {MAX_DEFINITION_CHARS} characters, not {len(value)}",
                         field="definition")
    if any((ord(c) < 32 and c not in "\n\t") or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise InputError("a definition may not hold control characters or lone surrogates", field="definition")
    return value


def label_insights(path: str, insight_ids: Sequence[str], label: str, *,
                   lock_timeout: float = WRITE_LOCK_TIMEOUT) -> Outcome:
    """Label these insights (by their text, so the label survives rebuilds and re-ingests) as `label`."""
    from failatlas.taxonomy import labels

    def act(store: Store) -> str:
        name = clean_label(label)
        if not insight_ids:
            raise InputError("no insight chosen", hint="select one or more insights to label")
        n = labels.label_insights(store, list(insight_ids), name, source="app")
        return f"Labelled {counted(n, 'distinct statement')} as “{name}”. The next `taxonomy build` learns from it."

    return _run(path, "insight_labels", act, lock_timeout)


def label_type(path: str, taxonomy_id: str, type_id: str, label: str, *,
               lock_timeout: float = WRITE_LOCK_TIMEOUT) -> Outcome:
    """Label every insight of a failure type of this taxonomy as `label`."""
    from failatlas.taxonomy import labels

    def act(store: Store) -> str:
        name = clean_label(label)
        n = labels.label_type(store, type_id, name, taxonomy_id)
        return (f"Labelled the whole type {type_id}, {counted(n, 'distinct statement')}, as “{name}”. The next "
                "`taxonomy build` learns from it.")

    return _run(path, "insight_labels", act, lock_timeout)


def remove_labels(path: str, insight_ids: Sequence[str], *, lock_timeout: float = WRITE_LOCK_TIMEOUT) -> Outcome:
    """Remove the labels of these insights' texts."""
    from failatlas.taxonomy import labels

    def act(store: Store) -> str:
        n = labels.remove_labels(store, insight_ids=list(insight_ids))
        return f"Removed {counted(n, 'label')}."

    return _run(path, "insight_labels", act, lock_timeout)


def _edit(path: str, action: str, type_ids: Sequence[str], args: dict, taxonomy_id: str,
          lock_timeout: float) -> Outcome:
    from failatlas.taxonomy.edits import edit_taxonomy

    if not all(type_ids) or (action != "merge" and not type_ids):
        return NO_TYPE

    def act(store: Store) -> str:
        before = {r[0] for r in store.query("SELECT id FROM failure_types WHERE taxonomy_id = ?", [taxonomy_id])}
        edit, types = edit_taxonomy(store, action, list(type_ids), args, taxonomy_id)
        touched = [f"{t.id} “{t.name}” ({counted(t.n_insights, 'distinct insight')})" for t in types
                   if t.id in type_ids or t.id not in before]
        return (f"{action.capitalize()}: " + "; ".join(touched) + f". Saved as edit {edit.id}: every later "
                "`taxonomy build` applies it to the types holding most of the same insights.")

    return _run(path, "taxonomy_edits", act, lock_timeout)


def rename_type(path: str, taxonomy_id: str, type_id: str, name: str, definition: str | None = None, *,
                lock_timeout: float = WRITE_LOCK_TIMEOUT) -> Outcome:
    """Rename a failure type (and give it a new definition), as `failatlas taxonomy rename`."""
    if not type_id:
        return NO_TYPE
    try:
        args = {"name": clean_label(name, where="name")}
        if (text := _clean_definition(definition)) is not None:
            args["definition"] = text
    except InputError as exc:
        return Outcome(False, f"Nothing was written: {exc.one_line()}")
    return _edit(path, "rename", [type_id], args, taxonomy_id, lock_timeout)


def merge_types(path: str, taxonomy_id: str, type_ids: Sequence[str], name: str | None = None, *,
                lock_timeout: float = WRITE_LOCK_TIMEOUT) -> Outcome:
    """Merge two or more types of one phase into the first (optionally renamed), as `failatlas taxonomy merge`."""
    try:
        args = {"name": clean_label(name, where="name")} if name and name.strip() else {}
    except InputError as exc:
        return Outcome(False, f"Nothing was written: {exc.one_line()}")
    return _edit(path, "merge", type_ids, args, taxonomy_id, lock_timeout)


def split_type(path: str, taxonomy_id: str, type_id: str, k: int = 2, *,
               lock_timeout: float = WRITE_LOCK_TIMEOUT) -> Outcome:
    """Split a type into `k` parts (k-means over its members' vectors), as `failatlas taxonomy split`."""
    if not 2 <= int(k) <= MAX_SPLIT:
        return Outcome(False, f"Nothing was written: a split makes 2 to {MAX_SPLIT} parts, not {k}.")
    return _edit(path, "split", [type_id], {"k": int(k)}, taxonomy_id, lock_timeout)

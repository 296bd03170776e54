"""A person's labels: an insight (or every insight of a failure type) put in a category, by the category's name as
the person spells it (a seed's category or a new one). Stored in `insight_labels`, keyed by the insight's
normalised text, so a label survives `taxonomy build` and a re-run of `ingest` (an insight's id and its type's
id may change; its words do not), and the next `taxonomy build` learns from it.

Labels that imported data already carries (`insight_sources.label`, e.g. TRAIL's categories) are not user labels:
they are ground truth for evaluation and never train anything, unless the user passes that file to `taxonomy
build --examples`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from failatlas.core.errors import InputError, NotFoundError
from failatlas.core.store import Store
from failatlas.ingest.model import normalise_text, text_hash
from failatlas.taxonomy.assign import resolve_taxonomy

MAX_LABEL_CHARS = 200


@dataclass(frozen=True)
class UserLabel:
    """One stored label: the text it follows, the category name, and how it was given."""

    text_hash: str
    text: str
    label: str
    source: str


def clean_label(label: str, *, where: str = "label") -> str:
    """The label with whitespace collapsed; InputError for an empty or over-long one, or one with control
    characters (a label becomes a type name printed in tables)."""
    value = normalise_text(label)
    if not value:
        raise InputError("a label must be non-empty text", field=where)
    if len(value) > MAX_LABEL_CHARS:
        raise InputError(f"a label is at most {MAX_LABEL_CHARS} characters, not {len(value)}", field=where)
    if any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF or ord(c) == 0x7F for c in value):
        raise InputError("a label may not hold control characters or lone surrogates", field=where)
    return value


def _write(store: Store, rows: Sequence[tuple[str, str, str]], source: str) -> int:
    """Store (text, label) pairs under `source` in one transaction; a text labelled again keeps the newest label.
    Returns the number of distinct texts labelled."""
    latest = {text_hash(text): (normalise_text(text), label) for text, label, _ in rows}
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO insight_labels (text_hash, text, label, source) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (text_hash) DO UPDATE SET text = excluded.text, label = excluded.label,"
            " source = excluded.source, created_at = now()",
            [(h, text, label, source) for h, (text, label) in latest.items()],
        )
    return len(latest)


def label_insights(store: Store, insight_ids: Sequence[str], label: str, *, source: str = "insight") -> int:
    """Label insights by id (the label follows their text). NotFoundError for an id not in the store."""
    label = clean_label(label)
    rows = store.query("SELECT id, text FROM insights WHERE id IN (SELECT unnest(?::VARCHAR[]))", [list(insight_ids)])
    missing = sorted(set(insight_ids) - {r[0] for r in rows})
    if missing:
        raise NotFoundError(f"no insight '{missing[0]}' in the store" + (f" (and {len(missing) - 1} more)"
                            if len(missing) > 1 else ""),
                            hint="insight ids are shown by `failatlas taxonomy show --definitions` and the app")
    return _write(store, [(text, label, source) for _, text in rows], source)


def label_type(store: Store, type_id: str, label: str, taxonomy_id: str | None = None) -> int:
    """Label every insight of a failure type of a taxonomy (default: the newest). NotFoundError for an unknown
    taxonomy or type."""
    label = clean_label(label)
    taxonomy_id = resolve_taxonomy(store, taxonomy_id)
    rows = store.query(
        "SELECT i.text FROM insight_failure_types a JOIN insights i ON i.id = a.insight_id"
        " WHERE a.taxonomy_id = ? AND a.failure_type_id = ?", [taxonomy_id, type_id])
    if not rows:
        raise NotFoundError(f"taxonomy {taxonomy_id} has no failure type '{type_id}' with insights",
                            hint="see the type ids with `failatlas taxonomy show`")
    source = f"type {taxonomy_id}/{type_id}"
    return _write(store, [(r[0], label, source) for r in rows], source)


def label_file(store: Store, path: Path) -> int:
    """Labels from a JSONL/JSON or CSV file: one row per labelled statement, with columns `text` and `label`
    (read by the generic insight importer, so its caps and one-line errors apply). All or nothing: a row without
    a label, or a bad label, stops the import naming file, line and field."""
    from failatlas.ingest.importers import INSIGHT_IMPORTERS

    path = Path(path)
    if not path.is_file():
        raise InputError("no such file", path=str(path), hint="--labels takes a JSONL or CSV file")
    fmt = "csv" if path.suffix.lower() in {".csv", ".tsv"} else "jsonl"
    loaded = INSIGHT_IMPORTERS.load(path, fmt, {})
    rows = []
    for raw in loaded.records:
        if raw.label is None:
            raise InputError("missing label", path=str(path), line=raw.source_line, field="label")
        try:
            rows.append((raw.text, clean_label(raw.label), ""))
        except InputError as exc:
            raise InputError(str(exc).split(": ", 1)[-1], path=str(path), line=raw.source_line,
                             field="label") from None
    if not rows:
        raise InputError("no labelled rows", path=str(path), hint="one row per statement with text and label")
    return _write(store, rows, f"file {path.name}")


def list_labels(store: Store) -> list[UserLabel]:
    """Every stored label, by label then text."""
    return [UserLabel(*r) for r in store.query(
        "SELECT text_hash, text, label, source FROM insight_labels ORDER BY label, text")]


def remove_labels(store: Store, *, insight_ids: Sequence[str] = (), label: str | None = None) -> int:
    """Remove the labels of these insights' texts, and/or every label with this name. Returns how many went."""
    hashes: list[str] = []
    if insight_ids:
        rows = store.query("SELECT id, text FROM insights WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                           [list(insight_ids)])
        missing = sorted(set(insight_ids) - {r[0] for r in rows})
        if missing:
            raise NotFoundError(f"no insight '{missing[0]}' in the store")
        hashes = [text_hash(t) for _, t in rows]
    with store.write() as conn:
        before = conn.execute("SELECT count(*) FROM insight_labels").fetchone()[0]
        if hashes:
            conn.execute("DELETE FROM insight_labels WHERE text_hash IN (SELECT unnest(?::VARCHAR[]))", [hashes])
        if label is not None:
            conn.execute("DELETE FROM insight_labels WHERE label = ?", [normalise_text(label)])
        return before - conn.execute("SELECT count(*) FROM insight_labels").fetchone()[0]


def labels_by_hash(store: Store) -> dict[str, str]:
    """text hash -> label, for every stored label."""
    return dict(store.query("SELECT text_hash, label FROM insight_labels"))

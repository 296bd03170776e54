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
from typing import Literal, get_args

from failatlas.core.errors import InputError, NotFoundError
from failatlas.core.store import Store
from failatlas.ingest.model import normalise_text, text_hash
from failatlas.taxonomy.assign import resolve_taxonomy

MAX_LABEL_CHARS = 200
MIN_ID_PREFIX = 4  # shorter prefixes are too easy to type by mistake (`label add a --as X`)
SHOWN = 5  # lines, ids or names an error quotes before "and N more"

Unmatched = Literal["refuse", "skip", "keep"]
UNMATCHED_CHOICES: tuple[str, ...] = get_args(Unmatched)


@dataclass(frozen=True)
class UserLabel:
    """One stored label: the text it follows, the category name, how it was given, and the ids of the store's
    insights with that text (empty: no statement of this store has it)."""

    text_hash: str
    text: str
    label: str
    source: str
    insight_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileLabels:
    """What `label_file` did: distinct statements labelled, and the file lines (with their text) of rows whose
    text matches no statement of the store, skipped or kept as `unmatched` said."""

    n_labelled: int
    unmatched_lines: tuple[tuple[int | None, str], ...]
    unmatched: Unmatched


def some(items: Sequence[object], n: int = SHOWN) -> str:
    """The first `n` items, comma-separated, then "and K more"."""
    shown = ", ".join(str(i) for i in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


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


ID_HINT = ("insight ids are shown by `failatlas label list`, `failatlas taxonomy show --definitions` and the app's"
           " drill-down")


def _insight_texts(store: Store, insight_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(id, text) of each insight named by its id or a unique prefix of at least MIN_ID_PREFIX characters.
    NotFoundError for one naming no insight, InputError for a prefix that names several."""
    wanted = list(dict.fromkeys(insight_ids))
    found = dict(store.query("SELECT id, text FROM insights WHERE id IN (SELECT unnest(?::VARCHAR[]))", [wanted]))
    rows = {i: found[i] for i in wanted if i in found}
    missing = []
    for given in (i for i in wanted if i not in found):
        hits = store.query("SELECT id, text FROM insights WHERE starts_with(id, ?) ORDER BY id LIMIT ?",
                           [given, SHOWN + 1]) if len(given) >= MIN_ID_PREFIX else []
        if len(hits) > 1:
            raise InputError(f"insight id prefix '{given}' names several insights ({some([h[0] for h in hits])})",
                             hint="give more of the id")
        if hits:
            rows[hits[0][0]] = hits[0][1]
        else:
            missing.append(given)
    if missing:
        raise NotFoundError(f"no insight '{missing[0]}' in the store" + (f" (and {len(missing) - 1} more)"
                            if len(missing) > 1 else ""), hint=ID_HINT)
    return list(rows.items())


def label_insights(store: Store, insight_ids: Sequence[str], label: str, *, source: str = "insight") -> int:
    """Label insights by id or unique id prefix (the label follows their text). NotFoundError for an id not in
    the store, InputError for an ambiguous prefix; nothing is written then."""
    label = clean_label(label)
    rows = _insight_texts(store, insight_ids)
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


def label_file(store: Store, path: Path, *, unmatched: Unmatched = "refuse") -> FileLabels:
    """Labels from a JSONL/JSON or CSV file: one row per labelled statement, with columns `text` and `label`
    (read by the generic insight importer, so its caps and one-line errors apply). All or nothing: a row without
    a label, or a bad label, stops the import naming file, line and field.

    Rows whose text matches no statement of the store (a typo, or labels given before the ingest): `refuse`
    raises InputError naming their lines and writes nothing; `skip` stores the other rows; `keep` stores them
    too (they train `taxonomy build` and `embed tune` and count in `taxonomy show --quality` like any label)."""
    from failatlas.ingest.importers import INSIGHT_IMPORTERS

    if unmatched not in UNMATCHED_CHOICES:
        raise InputError(f"unmatched must be one of {', '.join(UNMATCHED_CHOICES)}, not '{unmatched}'")
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
            rows.append((normalise_text(raw.text), clean_label(raw.label), raw.source_line))
        except InputError as exc:
            raise InputError(str(exc).split(": ", 1)[-1], path=str(path), line=raw.source_line,
                             field="label") from None
    if not rows:
        raise InputError("no labelled rows", path=str(path), hint="one row per statement with text and label")
    known = {r[0] for r in store.query("SELECT DISTINCT text FROM insights WHERE text IN"
                                       " (SELECT unnest(?::VARCHAR[]))", [[text for text, _, _ in rows]])}
    orphans = tuple((line, text) for text, _, line in rows if text not in known)
    if orphans and unmatched == "refuse":
        raise InputError(f"{len(orphans)} of {len(rows)} rows match no statement in this store (line"
                         f"{'s' if len(orphans) > 1 else ''} {some([line for line, _ in orphans])}); nothing was"
                         " written", path=str(path),
                         hint="fix their text; or pass --unmatched skip to store the other rows, or --unmatched"
                         " keep to store them too, e.g. for statements not ingested yet")
    if unmatched == "skip":
        rows = [r for r in rows if r[0] in known]
        if not rows:
            raise InputError("no row matches a statement in this store; nothing was written", path=str(path))
    source = f"file {path.name}"
    n = _write(store, [(text, label, source) for text, label, _ in rows], source)
    return FileLabels(n_labelled=n, unmatched_lines=orphans, unmatched=unmatched)


def list_labels(store: Store) -> list[UserLabel]:
    """Every stored label, by label then text, with the ids of the store's insights that have its text."""
    rows = store.query(
        "SELECT l.text_hash, l.text, l.label, l.source, list(i.id ORDER BY i.id) FILTER (WHERE i.id IS NOT NULL)"
        " FROM insight_labels l LEFT JOIN insights i ON i.text = l.text"
        " GROUP BY l.text_hash, l.text, l.label, l.source ORDER BY l.label, l.text")
    return [UserLabel(h, text, label, source, tuple(ids or ())) for h, text, label, source, ids in rows]


def count_labels(store: Store) -> int:
    """How many distinct statements the store holds labels for."""
    return store.query("SELECT count(*) FROM insight_labels")[0][0]


def count_unmatched(store: Store) -> int:
    """How many stored labels follow a text no insight of the store has (kept with `--unmatched keep`, or left by
    a statement gone from the store): they train and are cross-validated like the others, so reports say so."""
    return store.query("SELECT count(*) FROM insight_labels l WHERE NOT EXISTS"
                       " (SELECT 1 FROM insights i WHERE i.text = l.text)")[0][0]


def remove_labels(store: Store, *, insight_ids: Sequence[str] = (), label: str | None = None) -> int:
    """Remove the labels of these insights' texts (ids or unique id prefixes), and/or every label with this name.
    Returns how many went. NotFoundError, and nothing removed, for an unknown insight or a label name no stored
    label has (the message names a few that exist)."""
    hashes = [text_hash(t) for _, t in _insight_texts(store, insight_ids)] if insight_ids else []
    name = normalise_text(label) if label is not None else None
    with store.write() as conn:
        if name is not None and not conn.execute("SELECT 1 FROM insight_labels WHERE label = ?", [name]).fetchall():
            raise NotFoundError(_no_label_named(name, [r[0] for r in conn.execute(
                "SELECT label FROM insight_labels GROUP BY label ORDER BY count(*) DESC, label").fetchall()]),
                hint="`failatlas label list` shows them all")
        before = conn.execute("SELECT count(*) FROM insight_labels").fetchone()[0]
        if hashes:
            conn.execute("DELETE FROM insight_labels WHERE text_hash IN (SELECT unnest(?::VARCHAR[]))", [hashes])
        if name is not None:
            conn.execute("DELETE FROM insight_labels WHERE label = ?", [name])
        return before - conn.execute("SELECT count(*) FROM insight_labels").fetchone()[0]


def _no_label_named(name: str, existing: list[str]) -> str:
    """The message for a label name no stored label has: the nearest spellings first, then the most used."""
    import difflib

    if not existing:
        return f"no label is named '{name}': the store holds no labels"
    folded = {e.casefold(): e for e in reversed(existing)}  # the most used spelling of a case-folded name
    near = [folded[f] for f in difflib.get_close_matches(name.casefold(), list(folded), n=SHOWN, cutoff=0.5)]
    ordered = ["'" + n + "'" for n in dict.fromkeys([*near, *existing])]
    return f"no label is named '{name}'; the store's labels: {some(ordered)}"


def labels_by_hash(store: Store) -> dict[str, str]:
    """text hash -> label, for every stored label."""
    return dict(store.query("SELECT text_hash, label FROM insight_labels"))

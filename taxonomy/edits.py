"""A person's edits to a taxonomy (rename, merge, split), kept across rebuilds.

Each edit is stored in `taxonomy_edits` with the members of the types it names at the time (its anchors). Making
an edit changes the snapshot it is made on; every later `taxonomy build` applies the edits again, in order, to
the new types that hold most of each anchor's insights (at least `MIN_OVERLAP` of them). An edit whose type
cannot be found any more is reported, never applied to a guess."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel

from failatlas.core.errors import ConfigError, NotFoundError
from failatlas.core.store import Store
from failatlas.taxonomy.labelling.phrases import failure_name
from failatlas.taxonomy.labelling.readable import readable_or_honest
from failatlas.taxonomy.model import UNASSIGNED, FailureType

MIN_OVERLAP = 0.5
ACTIONS = ("rename", "merge", "split")

Record = tuple[str, str, float | None, str]  # (type id, insight id, cosine, method)
Content = Callable[[list[str]], tuple[list[str], np.ndarray]]  # insight ids -> (texts, unit vectors)


class Edit(BaseModel):
    """One stored edit."""

    id: int | None = None
    action: str
    phase: str
    anchors: list[list[str]]
    args: dict
    made_on: str


def load_edits(store: Store) -> list[Edit]:
    """Every stored edit, in the order they apply."""
    rows = store.query("SELECT id, action, phase, anchors, args, made_on FROM taxonomy_edits ORDER BY id")
    return [
        Edit(id=r[0], action=r[1], phase=r[2], anchors=json.loads(r[3]), args=json.loads(r[4]), made_on=r[5])
        for r in rows
    ]


def _members(records: Sequence[Record]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for type_id, insight_id, _, _ in records:
        out.setdefault(type_id, set()).add(insight_id)
    return out


def match(anchor: Sequence[str], phase: str, types: Sequence[FailureType], members: dict[str, set[str]]) -> str | None:
    """The type of `phase` that holds most of `anchor`'s insights, when it holds at least MIN_OVERLAP of them."""
    wanted = set(anchor)
    if not wanted:
        return None
    best, best_share = None, 0.0
    for t in types:
        if t.phase != phase:
            continue
        share = len(wanted & members.get(t.id, set())) / len(wanted)
        if share > best_share:
            best, best_share = t.id, share
    return best if best_share >= MIN_OVERLAP else None


def apply_edits(
    edits: Sequence[Edit], types: list[FailureType], records: list[Record], content: Content
) -> tuple[list[FailureType], list[Record], list[str]]:
    """`types` and `records` with `edits` applied in order, and one line per edit saying what happened to it."""
    notes = []
    for edit in edits:
        members = _members(records)
        targets = [match(a, edit.phase, types, members) for a in edit.anchors]
        label = f"edit {edit.id} ({edit.action} {json.dumps(edit.args, sort_keys=True)})"
        if any(t is None for t in targets) or len(set(targets)) != len(targets):
            notes.append(f"{label}: its type disappeared (no {edit.phase} type holds {MIN_OVERLAP:.0%} of its"
                         " insights); not applied")
            continue
        ids = [t for t in targets if t is not None]
        if edit.action == "rename":
            types = [_renamed(t, edit.args) if t.id == ids[0] else t for t in types]
        elif edit.action == "merge":
            types, records = _merge(types, records, ids, edit.args.get("name"))
        elif edit.action == "split":
            types, records = _split(types, records, ids[0], int(edit.args.get("k", 2)), content)
        notes.append(f"{label}: applied to {', '.join(ids)}")
    return types, records, notes


def _renamed(t: FailureType, args: dict) -> FailureType:
    update = {"name": args["name"], "naming_method": "edited"}
    if args.get("definition"):
        update["definition"] = args["definition"]
    return t.model_copy(update=update)


def _merge(
    types: list[FailureType], records: list[Record], ids: list[str], name: str | None
) -> tuple[list[FailureType], list[Record]]:
    keep, gone = ids[0], set(ids[1:])
    parts = [t for t in types if t.id in ids]
    weights = np.array([t.n_insights for t in parts], dtype=float)
    centroid = (np.asarray([t.centroid for t in parts]) * weights[:, None]).sum(axis=0)
    centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
    first = next(t for t in parts if t.id == keep)
    merged = first.model_copy(update={
        "n_insights": int(weights.sum()),
        "centroid": [float(x) for x in centroid],
        "merged_from": [m for t in parts for m in t.merged_from],
        "examples": sorted((e for t in parts for e in t.examples), key=lambda e: -e.similarity)[:len(first.examples)],
        **({"name": name, "naming_method": "edited"} if name else {}),
    })
    types = [merged if t.id == keep else t for t in types if t.id not in gone]
    records = [(keep if r[0] in gone else r[0], *r[1:]) for r in records]  # type: ignore[misc]
    return types, records


def _split(
    types: list[FailureType], records: list[Record], type_id: str, k: int, content: Content
) -> tuple[list[FailureType], list[Record]]:
    from sklearn.cluster import KMeans

    from failatlas.taxonomy.model import Example

    mine = [r for r in records if r[0] == type_id]
    if len(mine) < k:
        return types, records
    texts, vectors = content([r[1] for r in mine])
    parts = KMeans(n_clusters=k, n_init=10, random_state=0).fit_predict(vectors)
    original = next(t for t in types if t.id == type_id)
    phase_ids = [t.id for t in types if t.phase == original.phase]
    next_n = 1 + max(int(i.rsplit("T", 1)[1]) for i in phase_ids if i.rsplit("T", 1)[1].isdigit())
    new_types, new_ids = [], []
    taken = {t.name.lower() for t in types if t.id != type_id}  # names stay unique after a split (issue 42)
    for p in range(k):
        rows = np.flatnonzero(parts == p)
        centroid = vectors[rows].mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
        sims = vectors[rows] @ centroid
        order = rows[np.argsort(-sims, kind="stable")]
        others = [texts[r] for r in np.flatnonzero(parts != p)]
        new_id = type_id if p == 0 else f"{original.phase}/T{next_n + p - 1:02d}"
        name = _unique(readable_or_honest(failure_name([texts[r] for r in order], others), new_id),
                       taken | {original.name.lower()}, f"{p + 1} of {k}")
        taken.add(name.lower())
        new_ids.append(new_id)
        new_types.append(original.model_copy(update={
            "id": new_id,
            "name": name,
            "definition": f"Part {p + 1} of {k} of '{original.name}' (split by hand): " + "; ".join(
                f'"{texts[r][:140]}"' for r in order[:2]) + ".",
            "centroid": [float(x) for x in centroid],
            "n_insights": len(rows),
            "examples": [
                Example(insight_id=mine[r][1], text=texts[r], similarity=round(float(sims[list(rows).index(r)]), 4))
                for r in order[: len(original.examples) or 5]
            ],
            "naming_method": "edited",
        }))
    index = {r[1]: i for i, r in enumerate(mine)}
    types = [t for t in types if t.id != type_id] + new_types
    records = [(new_ids[int(parts[index[r[1]]])], *r[1:]) if r[0] == type_id else r for r in records]  # type: ignore[misc]
    return types, records


def _unique(name: str, taken: set[str], part: str) -> str:
    """`name`, or `name (part)` (then with a number) when another type or part already has it, case aside."""
    if name.lower() not in taken:
        return name
    candidate, n = f"{name} ({part})", 2
    while candidate.lower() in taken:
        candidate, n = f"{name} ({part}, {n})", n + 1
    return candidate


def edit_taxonomy(
    store: Store, action: str, type_ids: Sequence[str], args: dict, taxonomy_id: str | None = None
) -> tuple[Edit, list[FailureType]]:
    """Edit the taxonomy (default: the newest) and keep the edit for later builds, in one transaction: `rename`
    (args `name`, optional `definition`), `merge` (two or more types of a phase into the first; optional `name`)
    or `split` (one type into `k` parts by k-means over its members' vectors, each named from its insights).
    Returns the stored edit and the snapshot's types after it. Raises NotFoundError for an unknown taxonomy or
    type, ConfigError for an unknown action, types of different phases, or arguments that do not fit."""
    from failatlas.taxonomy.read import load_taxonomy
    from failatlas.taxonomy.writes import replace_types

    edit = _prepare(store, action, type_ids, args, taxonomy_id)
    tax = load_taxonomy(store, edit.made_on)
    records: list[Record] = [
        (r[0], r[1], r[2], r[3]) for r in store.query(
            "SELECT failure_type_id, insight_id, similarity, method FROM insight_failure_types"
            " WHERE taxonomy_id = ? ORDER BY insight_id", [tax.id])
    ]
    types, records, notes = apply_edits([edit], list(tax.types), records, stored_content(store, tax.embedding_set_id))
    with store.write() as conn:
        (next_id,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM taxonomy_edits").fetchone()
        edit = edit.model_copy(update={"id": int(next_id)})
        conn.execute(
            "INSERT INTO taxonomy_edits (id, action, phase, anchors, args, made_on) VALUES (?, ?, ?, ?, ?, ?)",
            [edit.id, edit.action, edit.phase, json.dumps(edit.anchors), json.dumps(edit.args), edit.made_on],
        )
        replace_types(conn, tax.id, types, records)
    return edit, types


def stored_content(store: Store, embedding_set_id: str | None) -> Content:
    """Texts and vectors of insights by id, from the store and the given embedding set."""

    def content(insight_ids: list[str]) -> tuple[list[str], np.ndarray]:
        from failatlas.embed import get_set
        from failatlas.taxonomy.inputs import require_vectors

        if embedding_set_id is None:
            raise NotFoundError("the taxonomy records no embedding set", hint="build a new taxonomy first")
        text_of = dict(store.query("SELECT id, text FROM insights WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                                   [insight_ids]))
        texts = [text_of[i] for i in insight_ids]
        return texts, require_vectors(store, texts, get_set(store, embedding_set_id), "insights to split")

    return content


def _prepare(store: Store, action: str, type_ids: Sequence[str], args: dict, taxonomy_id: str | None) -> Edit:
    """The edit, validated, with its anchors read from the snapshot."""
    from failatlas.taxonomy.assign import resolve_taxonomy

    if action not in ACTIONS:
        raise ConfigError(f"unknown edit '{action}'", hint=f"one of: {', '.join(ACTIONS)}")
    if (action == "merge") != (len(type_ids) >= 2) or (action != "merge" and len(type_ids) != 1):
        raise ConfigError(f"{action} names {'two or more types' if action == 'merge' else 'one type'}")
    if action == "rename" and not str(args.get("name", "")).strip():
        raise ConfigError("rename needs a non-empty name")
    if action == "split" and int(args.get("k", 2)) < 2:
        raise ConfigError("split needs k >= 2 parts")
    taxonomy_id = resolve_taxonomy(store, taxonomy_id)
    phases = []
    anchors = []
    for type_id in type_ids:
        if type_id == UNASSIGNED:
            raise ConfigError("'unassigned' is no failure type and cannot be edited")
        row = store.query("SELECT phase FROM failure_types WHERE taxonomy_id = ? AND id = ?", [taxonomy_id, type_id])
        if not row:
            raise NotFoundError(f"no failure type '{type_id}' in taxonomy {taxonomy_id}",
                                hint="see the ids with `failatlas taxonomy show`")
        phases.append(row[0][0])
        anchors.append([r[0] for r in store.query(
            "SELECT insight_id FROM insight_failure_types WHERE taxonomy_id = ? AND failure_type_id = ?"
            " ORDER BY insight_id", [taxonomy_id, type_id])])
    if len(set(phases)) != 1:
        raise ConfigError(f"the types belong to different phases: {sorted(set(phases))}")
    if len(set(type_ids)) != len(type_ids):
        raise ConfigError("a type is named twice")
    return Edit(action=action, phase=phases[0], anchors=anchors, args=args, made_on=taxonomy_id)

"""Failure types by cause (ingest/kinds.py): in each phase the insights of one known kind are one type, whatever
clusters and objects they fall in; the objects they failed on (functions, files, packages, metrics) are data,
listed beside the type (`objects_of`: the app's drill-down, `taxonomy show`), not a type each. No type mixes
kinds, every insight of a known kind lands in the type of its kind, and such a type is named by its kind.

Clusters find the types of the free text whose kind no evidence decided (`unknown`); labels sub-divide a kind
(taxonomy/scoped.py).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from failatlas.core.store import Store
from failatlas.ingest.kinds import UNKNOWN, kind_name
from failatlas.taxonomy.drafts import Draft, draft_of
from failatlas.taxonomy.inputs import ClusteringInput
from failatlas.taxonomy.model import FailureCategory, FailureType, TypeLabel

MAX_LISTED = 12  # objects a type's inclusion criteria name; `objects_of` lists them all
FACET_METHOD = "facet"  # insight_failure_types.method of an outlier that forms a type of its kind with others


@dataclass
class Facets:
    """Each insight's kind and object."""

    kind: dict[str, str] = field(default_factory=dict)
    object: dict[str, str | None] = field(default_factory=dict)

    def of(self, insight_id: str) -> str:
        return self.kind.get(insight_id, UNKNOWN)


def load_facets(store: Store, insight_ids: Sequence[str]) -> Facets:
    """The stored facets of these insights (`unknown` and no object for a store without them)."""
    facets = Facets()
    if not insight_ids:
        return facets
    with store.read() as conn:
        columns = {r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'insights'").fetchall()}
        if "kind" not in columns:
            return facets
        conn.execute("CREATE OR REPLACE TEMP TABLE facet_ids (id VARCHAR)")
        conn.executemany("INSERT INTO facet_ids VALUES (?)", [[i] for i in insight_ids])
        rows = conn.execute("SELECT i.id, coalesce(i.kind, 'unknown'), i.object FROM insights i"
                            " JOIN facet_ids f ON f.id = i.id").fetchall()
    for insight_id, kind, obj in rows:
        facets.kind[insight_id], facets.object[insight_id] = kind, obj
    return facets


def draft_kind(draft: Draft, facets: Facets) -> str:
    """The one kind of a draft's insights (drafts made here never mix them); `unknown` when they do."""
    kinds = {facets.of(i) for i in draft.insight_ids}
    return kinds.pop() if len(kinds) == 1 else UNKNOWN


def apply_facets(
    drafts: list[Draft],
    outlier_rows: np.ndarray,
    ids: list[str],
    texts: list[str],
    vectors: np.ndarray,
    phase: str,
    facets: Facets,
) -> tuple[list[Draft], np.ndarray, dict[str, str]]:
    """One phase's drafts as types by cause: the insights of each known kind in one draft, whatever clusters they
    were in and whatever objects they name (objects are data: `objects_of`), with the outliers of that kind placed
    in it; the clusters of kind `unknown` (free text) stay as they were, split off the known kinds they mixed with.
    Returns the drafts, the outlier rows left (kind `unknown`: assigned as before, only to types of that kind) and
    the method of each placed outlier (`nearest_centroid` into a kind the clusters held, else `facet`)."""
    row_of = {insight_id: r for r, insight_id in enumerate(ids)}
    unknown: list[tuple[list[int], Draft | None]] = []
    known: dict[str, tuple[list[int], list[Draft]]] = {}
    for d in drafts:
        by_kind: dict[str, list[int]] = defaultdict(list)
        for insight_id in d.insight_ids:
            by_kind[facets.of(insight_id)].append(row_of[insight_id])
        for kind, rows in sorted(by_kind.items()):
            if kind == UNKNOWN:
                unknown.append((rows, d))
            else:
                known.setdefault(kind, ([], []))[0].extend(rows)
                known[kind][1].append(d)
    placed: dict[str, str] = {}
    left: list[int] = []
    for r in (int(x) for x in outlier_rows):
        kind = facets.of(ids[r])
        if kind == UNKNOWN:
            left.append(r)
            continue
        placed[ids[r]] = "nearest_centroid" if kind in known and known[kind][1] else FACET_METHOD
        known.setdefault(kind, ([], []))[0].append(r)
    out = [draft_of(np.array(rows), ids, texts, vectors, phase, parent.keywords, parent.merged_from,
                    origin=parent.origin) for rows, parent in unknown if parent is not None]
    for kind, (rows, parents) in sorted(known.items()):
        largest = max(parents, key=lambda d: len(d.insight_ids), default=None)
        merged = sorted({m for d in parents for m in d.merged_from}) or [f"facet:{phase}:{kind}"]
        out.append(draft_of(np.array(rows), ids, texts, vectors, phase, largest.keywords if largest else [], merged,
                            origin=largest.origin if largest else "cluster"))
    return out, np.array(left, dtype=int), placed


def readable_object(obj: str) -> str:
    """An object as a reader sees it: `ridge.py::RidgeRegression.fit` -> "RidgeRegression.fit in ridge.py"."""
    file, sep, qualname = obj.partition("::")
    return f"{qualname} in {file}" if sep and qualname else obj


def facet_name(kind: str) -> str:
    """A type's name from its kind: the cause ("Crash in agent code"); the objects it failed on are data, listed
    beside the name (`objects_of`), never one type per object."""
    return kind_name(kind)


def facet_label(label: TypeLabel, draft: Draft, facets: Facets) -> TypeLabel:
    """`label` with the name its kind and shared object give, for a type of a known kind; as it is otherwise (free
    text of unknown kind keeps the labeller's name)."""
    kind = draft_kind(draft, facets)
    if kind == UNKNOWN:
        return label
    objects = sorted({o for o in (facets.object.get(i) for i in draft.insight_ids) if o})
    listed = ", ".join(readable_object(o) for o in objects[:MAX_LISTED])
    more = f" and {len(objects) - MAX_LISTED} more" if len(objects) > MAX_LISTED else ""
    return label.model_copy(update={"name": facet_name(kind), "inclusion_criteria": [
        f"Kind: {kind_name(kind)} ({kind}), from the evidence the insights were mined with.",
        *([f"Objects: {listed}{more}."] if objects else []), *label.inclusion_criteria]})


def faceted_drafts(drafts: list[Draft], outlier_rows: np.ndarray, ci: ClusteringInput, vectors: np.ndarray,
                   facets: Facets, placed: dict[str, str]) -> tuple[list[Draft], np.ndarray]:
    """`apply_facets` on one clustering's drafts and outliers (the methods of the outliers it places are added to
    `placed`); the drafts as they are where no insight has a known kind (imported free text, an old store)."""
    ids = ci.members["insight_id"].to_list()
    if all(facets.of(i) == UNKNOWN for i in ids):
        return drafts, outlier_rows
    phase = ci.phase or Counter(ci.members["phase"].to_list()).most_common(1)[0][0]
    out, left, methods = apply_facets(drafts, np.asarray(outlier_rows, dtype=int), ids, ci.members["text"].to_list(),
                                      vectors, phase, facets)
    placed.update(methods)
    return out, left


def unknown_kind_types(types: list[FailureType], members: dict[str, tuple[list[str], list[str]]], facets: Facets
                       ) -> list[FailureType]:
    """The types whose insights are of unknown kind: the only ones an outlier of unknown kind may join."""
    return [t for t in types if all(facets.of(i) == UNKNOWN for i in members.get(t.id, ([], []))[0])]


def by_kind(store: Store, taxonomy_id: str, insight_ids: Sequence[str], phases: Sequence[str],
            centroids: dict[str, tuple[list[str], np.ndarray]]) -> tuple[list[str], dict[str, tuple[list[str],
                                                                                            np.ndarray]]]:
    """Keys that let `assign_by_phase` choose only among the types of an insight's phase and kind: one key per
    insight (`phase/kind`) and the taxonomy's centroids under the same keys (a type's kind is its members')."""
    facets = load_facets(store, list(insight_ids))
    kinds = dict(store.query(
        "SELECT ift.failure_type_id, CASE WHEN count(DISTINCT coalesce(i.kind, 'unknown')) = 1"
        " THEN any_value(coalesce(i.kind, 'unknown')) ELSE 'unknown' END FROM insight_failure_types ift"
        " JOIN insights i ON i.id = ift.insight_id WHERE ift.taxonomy_id = ? GROUP BY ift.failure_type_id",
        [taxonomy_id]))
    keyed: dict[str, tuple[list[str], list[np.ndarray]]] = {}
    for phase, (type_ids, matrix) in centroids.items():
        for type_id, row in zip(type_ids, matrix, strict=True):
            ids, rows = keyed.setdefault(f"{phase}/{kinds.get(type_id, UNKNOWN)}", ([], []))
            ids.append(type_id)
            rows.append(row)
    keys = [f"{phase}/{facets.of(i)}" for i, phase in zip(insight_ids, phases, strict=True)]
    return keys, {k: (ids, np.stack(rows)) for k, (ids, rows) in keyed.items()}


def facet_categories(phase: str, drafts: list[Draft], facets: Facets, categories: list[FailureCategory],
                     category_ids: list[str]) -> tuple[list[FailureCategory], list[str]]:
    """Categories by kind where every type of the phase has a known kind: the types of one entry point's kinds
    (two or more) under its name ("Missing implementation component"), else the types of one kind (two or more)
    under the kind's name; the rest stand alone. As the labeller made them otherwise."""
    from failatlas.ingest.kinds import kind as kind_of

    kinds = [draft_kind(d, facets) for d in drafts]
    if not drafts or UNKNOWN in kinds:
        return categories, category_ids
    groups: dict[str, list[int]] = defaultdict(list)
    for i, k in enumerate(kinds):
        family = kind_of(k).entry_point
        family_size = sum(1 for j in kinds if kind_of(j).entry_point == family) if family else 0
        groups[family.capitalize() if family and family_size >= 2 else kind_name(k)].append(i)
    out: list[FailureCategory] = []
    ids = [""] * len(drafts)
    for name, members in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        if len(members) < 2:
            continue
        category_id = f"{phase}/C{len(out) + 1}"
        names = sorted({kind_name(kinds[i]) for i in members})
        out.append(FailureCategory(id=category_id, phase=phase, name=name, keywords=[], naming_method="facet",
                                   definition=f"Failure types of the kind(s): {', '.join(names)}."))
        for i in members:
            ids[i] = category_id
    return out, ids


def objects_of(store: Store, taxonomy_id: str) -> dict[str, list[tuple[str, int]]]:
    """Each type's objects with their occurrences, most frequent first: what a type by cause failed on."""
    out: dict[str, list[tuple[str, int]]] = {}
    for type_id, obj, n in store.query(
            "SELECT ift.failure_type_id, i.object, sum(greatest(i.n_occurrences, 1))::BIGINT FROM"
            " insight_failure_types ift JOIN insights i ON i.id = ift.insight_id WHERE ift.taxonomy_id = ?"
            " AND i.object IS NOT NULL GROUP BY ALL ORDER BY 1, 3 DESC, 2", [taxonomy_id]):
        out.setdefault(type_id, []).append((obj, int(n)))
    return out


def objects_text(objects: Sequence[tuple[str, int]], max_listed: int = MAX_LISTED) -> str:
    """A type's objects as one cell: "RidgeRegression.fit in ridge.py (2), kmeanspp_init in kmeans.py"."""
    cells = [readable_object(o) + (f" ({n})" if n > 1 else "") for o, n in objects[:max_listed]]
    more = len(objects) - max_listed
    return ", ".join(cells) + (f" and {more} more" if more > 0 else "")


def with_objects(store: Store, frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (a row per failure type, with `taxonomy_id` and `failure_type_id`) with an `objects` column: each
    type's objects with their occurrences as one cell (`objects_text`, every object listed), '' for a type
    without objects. What the exports print beside a type's name."""
    if not frame.height:
        return frame.with_columns(pl.lit("").alias("objects"))
    cells: dict[tuple[str, str], str] = {}
    for taxonomy_id in frame["taxonomy_id"].unique().to_list():
        for type_id, objects in objects_of(store, taxonomy_id).items():
            cells[(taxonomy_id, type_id)] = objects_text(objects, max_listed=len(objects))
    return frame.with_columns(pl.struct("taxonomy_id", "failure_type_id").map_elements(
        lambda r: cells.get((r["taxonomy_id"], r["failure_type_id"]), ""), return_dtype=pl.Utf8).alias("objects"))

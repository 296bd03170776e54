"""Failure types that respect the insights' facets (ingest/kinds.py): no type mixes kinds, every insight of a known
kind lands in a type of its kind, no type holds more than `MAX_SHARE` of its phase unless its insights share one
object, and a type of a known kind is named by its kind and the object its insights share.

Clusters still find the sub-types within a kind (a kind's insights in two clusters stay two types); the facets only
split what the clustering mixed and place what it left out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from failatlas.core.store import Store
from failatlas.ingest.kinds import UNKNOWN, kind_name
from failatlas.taxonomy.drafts import Draft, draft_of
from failatlas.taxonomy.inputs import ClusteringInput
from failatlas.taxonomy.model import FailureCategory, FailureType, TypeLabel

MAX_SHARE = 0.4  # a type over this share of its phase's insights is split by object, where they name several
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
    """The drafts of one phase's clustering split by kind (then by object where one holds over `MAX_SHARE` of the
    phase), with the outliers of known kinds placed: each joins the nearest draft of its kind, or forms one with
    the other outliers of its kind where the clusters hold none. Returns the drafts, the outlier rows left (kind
    `unknown`: assigned as before, only to types of that kind) and the method of each placed outlier."""
    row_of = {insight_id: r for r, insight_id in enumerate(ids)}
    groups: list[tuple[list[int], Draft]] = []
    for d in drafts:
        by_kind: dict[str, list[int]] = defaultdict(list)
        for insight_id in d.insight_ids:
            by_kind[facets.of(insight_id)].append(row_of[insight_id])
        groups += [(rows, d) for _, rows in sorted(by_kind.items())]
    placed: dict[str, str] = {}
    left: list[int] = []
    new_by_kind: dict[str, list[int]] = defaultdict(list)
    centroids = [_centroid(vectors[rows]) for rows, _ in groups]
    for r in (int(x) for x in outlier_rows):
        kind = facets.of(ids[r])
        if kind == UNKNOWN:
            left.append(r)
            continue
        same = [g for g, (rows, _) in enumerate(groups) if facets.of(ids[rows[0]]) == kind]
        if same:
            best = max(same, key=lambda g: float(centroids[g] @ vectors[r]))
            groups[best][0].append(r)
            placed[ids[r]] = "nearest_centroid"
        else:
            new_by_kind[kind].append(r)
    for _, rows in sorted(new_by_kind.items()):
        groups.append((rows, None))  # type: ignore[arg-type]
        placed.update({ids[r]: FACET_METHOD for r in rows})
    total = len(ids)
    out: list[Draft] = []
    for rows, parent in groups:
        for part in _split_large(rows, ids, facets, total):
            keywords = parent.keywords if parent is not None else []
            merged = parent.merged_from if parent is not None else [f"facet:{phase}:{facets.of(ids[part[0]])}"]
            out.append(draft_of(np.array(part), ids, texts, vectors, phase, keywords, merged,
                                origin=parent.origin if parent is not None else "cluster"))
    return out, np.array(left, dtype=int), placed


def _centroid(vectors: np.ndarray) -> np.ndarray:
    c = vectors.mean(axis=0)
    n = np.linalg.norm(c)
    return c / n if n > 0 else c


def _split_large(rows: list[int], ids: list[str], facets: Facets, total: int) -> list[list[int]]:
    """`rows` as one group, or split by object when they hold over MAX_SHARE of the phase and name several."""
    if total == 0 or len(rows) <= MAX_SHARE * total:
        return [rows]
    by_object: dict[str | None, list[int]] = defaultdict(list)
    for r in rows:
        by_object[facets.object.get(ids[r])].append(r)
    if len(by_object) < 2:
        return [rows]
    return [by_object[k] for k in sorted(by_object, key=lambda o: (o is None, o or ""))]


def readable_object(obj: str) -> str:
    """An object as a type name shows it: `ridge.py::RidgeRegression.fit` -> "RidgeRegression.fit in ridge.py"."""
    file, sep, qualname = obj.partition("::")
    return f"{qualname} in {file}" if sep and qualname else obj


def facet_name(kind: str, objects: Sequence[str | None], max_listed: int = 3) -> str:
    """A type's name from its kind and what its insights' objects share: the one object ("Dependency not
    installed: scikit-learn-extra"), the one file they are in, or the few objects there are; the kind's name
    alone otherwise. An object the kind's name already says ("No conclusion written", "conclusion") is left out."""
    name = kind_name(kind)
    named = sorted({o for o in objects if o})
    if not named or len(named) < len(set(objects)) or all(o.lower() in name.lower() for o in named):
        return name
    if len(named) == 1:
        return f"{name}: {readable_object(named[0])}"
    files = {o.partition("::")[0] for o in named}
    if len(files) == 1 and all("::" in o for o in named):
        return f"{name} in {next(iter(files))}"
    if len(named) <= max_listed:
        return f"{name}: " + ", ".join(readable_object(o) for o in named)
    return name


def facet_label(label: TypeLabel, draft: Draft, facets: Facets) -> TypeLabel:
    """`label` with the name its kind and shared object give, for a type of a known kind; as it is otherwise (free
    text of unknown kind keeps the labeller's name)."""
    kind = draft_kind(draft, facets)
    if kind == UNKNOWN:
        return label
    name = facet_name(kind, [facets.object.get(i) for i in draft.insight_ids])
    return label.model_copy(update={"name": name, "inclusion_criteria": [
        f"Kind: {kind_name(kind)} ({kind}), from the evidence the insights were mined with.",
        *label.inclusion_criteria]})


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

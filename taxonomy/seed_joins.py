"""A new type that duplicates a seed category joins it, so that no failure appears twice in a table (issue 41).

In a phase a seed explains (its prototypes, or categories learned with it), the statements the seed leaves become
new types. A new type
of a kind the evidence decided (ingest/kinds.py) joins the seed type that holds the most insights of that kind:
the same cause, found again, so a kind is never listed both under the seed's name and under its own. A new type
of free text (kind `unknown`) whose centroid is nearer to a seed type's centroid than any two distinct seed types
of the phase are to each other is that seed category too, and joins it. Neither rule looks at a label; the second
is calibrated on the phase's own seed types, so it follows any model's cosine scale. Every new type that stays
records its nearest seed category and the cosine, so a type no readable phrase names is named as a variant of
that category with the similarity shown (`variant_name`), never "Unnamed type". Categories that labels or
examples alone name (no seed) join nothing: nothing says they cover the domain (taxonomy/learned.py), and a few
categories far apart would let the threshold take most of it; their nearest one still names a type's variant.
"""

from __future__ import annotations

import numpy as np

from failatlas.ingest.kinds import UNKNOWN
from failatlas.taxonomy.drafts import Draft, draft_of
from failatlas.taxonomy.facets import Facets, draft_kind
from failatlas.taxonomy.labelling.readable import is_honest
from failatlas.taxonomy.model import TypeLabel


def _unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def join_threshold(seeded: list[Draft]) -> float | None:
    """The cosine above which a new type is a seed type found again: the largest cosine between the centroids of
    two distinct seed types of the phase. None with fewer than two seed types (nothing to calibrate on)."""
    if len(seeded) < 2:
        return None
    centroids = _unit(np.stack([d.centroid for d in seeded]))
    sims = centroids @ centroids.T
    np.fill_diagonal(sims, -np.inf)
    return float(sims.max())


def join_seed_duplicates(drafts: list[Draft], ids: list[str], texts: list[str], vectors: np.ndarray,
                         facets: Facets, *, join: bool = True) -> tuple[list[Draft], list[dict]]:
    """One phase's drafts with each new type that duplicates a seed type merged into it (see the module
    docstring), and a note per join (the new type's first member, its size, the category, the cosine and the
    threshold). The new types that stay get `nearest_seed`. `ids`, `texts` and `vectors` cover every insight of
    the drafts (the phase's whole clustering). Without `join` (categories that labels alone name: nothing says
    they cover the domain, and a few of them are far apart, so the threshold would take most of it), nothing
    joins; the nearest category is only recorded."""
    seeded = [d for d in drafts if d.seed_category is not None]
    new = [d for d in drafts if d.seed_category is None]
    if not seeded or not new:
        return drafts, []
    threshold = join_threshold(seeded)
    centroids = _unit(np.stack([d.centroid for d in seeded]))
    row_of = {insight_id: r for r, insight_id in enumerate(ids)}
    joined: dict[int, list[Draft]] = {}
    notes: list[dict] = []
    for d in new:
        sims = centroids @ (d.centroid / max(float(np.linalg.norm(d.centroid)), 1e-12))
        kind = draft_kind(d, facets)
        if kind != UNKNOWN:  # a type of a known kind is named by its kind: it joins or stays as it is
            # learned categories of a kind (taxonomy/scoped.py) take only what their labels are about: never more
            held = [0 if s.report is not None and s.report.method == "learned" else
                    sum(facets.of(i) == kind for i in s.insight_ids) for s in seeded]
            if join and max(held) > 0:
                best = int(np.argmax(held))
                joined.setdefault(best, []).append(d)
                notes.append({"type_of": d.texts[0], "n_insights": len(d.insight_ids), "kind": kind,
                              "joined": seeded[best].seed_category.name, "cosine": round(float(sims[best]), 4)})
            continue
        best = int(np.argmax(sims))
        cosine = float(sims[best])
        target = seeded[best]
        assert target.seed_category is not None
        if join and threshold is not None and cosine >= threshold:
            joined.setdefault(best, []).append(d)
            notes.append({"type_of": d.texts[0], "n_insights": len(d.insight_ids),
                          "joined": target.seed_category.name, "cosine": round(cosine, 4),
                          "threshold": round(threshold, 4)})
        else:
            d.nearest_seed = (target.seed_category.name, cosine)
    if not joined:
        return drafts, notes
    merged_drafts = {id(d) for group in joined.values() for d in group}
    out: list[Draft] = []
    for d in drafts:
        if id(d) in merged_drafts:
            continue
        k = next((k for k, s in enumerate(seeded) if s is d), None)
        if k is None or k not in joined:
            out.append(d)
            continue
        members = [d, *joined[k]]
        rows = np.array([row_of[i] for m in members for i in m.insight_ids], dtype=int)
        out.append(draft_of(rows, ids, texts, vectors, d.phase, d.keywords,
                            sorted({x for m in members for x in m.merged_from}), origin=d.origin,
                            seed_category=d.seed_category, report=d.report))
    return out, notes


def merge_same_category(drafts: list[Draft], ids: list[str], texts: list[str], vectors: np.ndarray,
                        facets: Facets) -> tuple[list[Draft], list[dict]]:
    """One phase's drafts with the seed (or learned) types that stand for the same category and the same kind
    merged into one, so a category is never listed twice under its name with a stray word added to tell the two
    apart (issue 53: learned once per kind, or found by prototypes and by labels). Types of the same category in
    different kinds the evidence decided stay apart (measurably different: the evidence says so), and are named
    by their kind. A note per merge."""
    groups: dict[tuple[str, str], list[Draft]] = {}
    for d in drafts:
        if d.seed_category is not None:
            groups.setdefault((d.seed_category.name.lower(), draft_kind(d, facets)), []).append(d)
    merged = [g for g in groups.values() if len(g) > 1]
    if not merged:
        return drafts, []
    row_of = {insight_id: r for r, insight_id in enumerate(ids)}
    gone = {id(d) for g in merged for d in g[1:]}
    out: list[Draft] = []
    notes: list[dict] = []
    for d in drafts:
        if id(d) in gone:
            continue
        group = next((g for g in merged if g[0] is d), None)
        if group is None:
            out.append(d)
            continue
        rows = np.array([row_of[i] for m in group for i in m.insight_ids], dtype=int)
        out.append(draft_of(rows, ids, texts, vectors, d.phase, d.keywords,
                            sorted({x for m in group for x in m.merged_from}), origin=d.origin,
                            seed_category=d.seed_category, report=d.report))
        notes.append({"merged": d.seed_category.name, "n_types": len(group), "n_insights": len(rows)})
    return out, notes


def variant_name(category: str, cosine: float) -> str:
    """The name of a new type no readable phrase names: a variant of its nearest seed category, with the cosine
    between their centroids shown ("Variant of Goal Deviation (cosine 0.71)")."""
    return f"Variant of {category} (cosine {cosine:.2f})"


def variant_label(label: TypeLabel, draft: Draft) -> TypeLabel:
    """`label` named as a variant of the draft's nearest seed category where the labeller found no readable name
    for it; as it is otherwise."""
    if draft.nearest_seed is None or not is_honest(label.name):
        return label
    category, cosine = draft.nearest_seed
    return label.model_copy(update={"name": variant_name(category, cosine), "inclusion_criteria": [
        f"No readable phrase is common to its statements; its nearest seed category is '{category}' (cosine"
        f" {cosine:.2f} between their centroids, below what would make it that category).",
        *label.inclusion_criteria]})

"""A new type that duplicates a seed type joins it; the new types that stay know their nearest seed category, and
one without a readable name is named as its variant (taxonomy/seed_joins.py, issue 41)."""

from __future__ import annotations

import numpy as np

from failatlas.taxonomy.drafts import Draft, draft_of
from failatlas.taxonomy.facets import Facets
from failatlas.taxonomy.labelling.readable import honest_name, unreadable_reason
from failatlas.taxonomy.model import SeedReport, TypeLabel
from failatlas.taxonomy.seed_joins import join_seed_duplicates, join_threshold, variant_label
from failatlas.taxonomy.seeding import SeedCategory


def _vectors(directions: list[np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
    rows = [d + 0.05 * rng.standard_normal(d.shape) for d in directions for _ in range(n)]
    out = np.stack(rows)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _setup(kinds: dict[str, str] | None = None, learned: bool = False):  # noqa: ANN202
    """Three groups of 4 insights: seed A, seed B, then a group near A ('a2') and one far from both ('c')."""
    rng = np.random.default_rng(0)
    axes = np.eye(8)
    near_a = axes[0] + 0.15 * axes[2]
    vectors = _vectors([axes[0], 0.5 * axes[0] + axes[1], near_a, axes[3]], 4, rng)
    ids = [f"i{k}" for k in range(16)]
    texts = [f"text {k}" for k in range(16)]
    report = SeedReport(phase="p", n_insights=16, n_explained=8, threshold=0.2, null_quantile=0.8,
                        method="learned") if learned else None
    seeded = [draft_of(np.arange(4 * g, 4 * g + 4), ids, texts, vectors, "p", [], [f"seed:{name}"], origin="seed",
                       seed_category=SeedCategory(name=name, definition="-"), report=report)
              for g, name in enumerate(("Alpha failures", "Beta failures"))]
    new = [draft_of(np.arange(4 * g, 4 * g + 4), ids, texts, vectors, "p", [], [f"c{g}"], origin="new")
           for g in (2, 3)]
    facets = Facets(kind=dict(kinds or {}))
    return seeded, new, ids, texts, vectors, facets


def _members(drafts: list[Draft]) -> dict[str, set[str]]:
    return {(d.seed_category.name if d.seed_category else d.merged_from[0]): set(d.insight_ids) for d in drafts}


def test_a_free_text_type_nearer_a_seed_type_than_seed_types_are_to_each_other_joins_it() -> None:
    seeded, new, ids, texts, vectors, facets = _setup()
    threshold = join_threshold(seeded)
    cosines = [float(new[0].centroid @ seeded[0].centroid), float(new[1].centroid @ seeded[0].centroid)]
    assert cosines[0] >= threshold > cosines[1]  # the construction: one near Alpha, one far from both
    out, notes = join_seed_duplicates([*seeded, *new], ids, texts, vectors, facets)
    members = _members(out)
    assert members["Alpha failures"] == {f"i{k}" for k in (*range(4), *range(8, 12))}
    assert members["Beta failures"] == {f"i{k}" for k in range(4, 8)} and members["c3"] == {f"i{k}" for k in
                                                                                              range(12, 16)}
    assert [n["joined"] for n in notes] == ["Alpha failures"] and notes[0]["cosine"] >= notes[0]["threshold"]
    stayed = next(d for d in out if d.merged_from == ["c3"])
    assert stayed.nearest_seed is not None and stayed.nearest_seed[1] < threshold


def test_a_new_type_of_a_kind_a_seed_type_holds_joins_that_seed_type_not_a_learned_one() -> None:
    kinds = {**{f"i{k}": "crash" for k in (5, 6, 12, 13, 14, 15)}, **{f"i{k}": "wrong_value" for k in (0, 1)}}
    seeded, new, ids, texts, vectors, facets = _setup(kinds)
    out, _ = join_seed_duplicates([*seeded, new[1]], ids, texts, vectors, facets)  # c3: all crash, far from both
    assert _members(out)["Beta failures"] == {f"i{k}" for k in (*range(4, 8), *range(12, 16))}
    seeded, new, ids, texts, vectors, facets = _setup(kinds, learned=True)
    out, notes = join_seed_duplicates([*seeded, new[1]], ids, texts, vectors, facets)
    assert not notes and _members(out)["c3"] == {f"i{k}" for k in range(12, 16)}


def test_a_type_without_a_readable_name_is_named_as_a_variant_of_its_nearest_seed_category() -> None:
    seeded, new, ids, texts, vectors, facets = _setup()
    out, _ = join_seed_duplicates([*seeded, *new], ids, texts, vectors, facets)
    stayed = next(d for d in out if d.merged_from == ["c3"])
    honest = TypeLabel(name=honest_name("p/T04"), definition="d", naming_method="offline",
                       inclusion_criteria=[], examples=[])
    named = variant_label(honest, stayed)
    category, cosine = stayed.nearest_seed
    assert named.name == f"Variant of {category} (cosine {cosine:.2f})" and unreadable_reason(named.name) is None
    assert category in named.inclusion_criteria[0]
    readable = TypeLabel(name="Tool call repeated", definition="d", naming_method="offline",
                       inclusion_criteria=[], examples=[])
    assert variant_label(readable, stayed) == readable

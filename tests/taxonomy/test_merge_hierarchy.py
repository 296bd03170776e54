"""Merging near-duplicate failure types, and grouping types into a few categories per phase."""

from __future__ import annotations

import json

import numpy as np

from failatlas.taxonomy import BuildParams, merge_groups
from failatlas.taxonomy import run as build
from failatlas.taxonomy.hierarchy import group_centroids, n_categories
from tests.taxonomy.conftest import TRAIL_CLUSTERING, TRAIL_PARAMS


def _unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_merge_needs_both_close_centroids_and_shared_keywords():
    rng = np.random.default_rng(1)
    a, b = _unit(rng.normal(size=16)), _unit(rng.normal(size=16))
    near_a = _unit(a + 0.05 * rng.normal(size=16))
    centroids = np.stack([a, near_a, b, _unit(a + 0.05 * rng.normal(size=16))])
    keywords = [
        ["import error", "module"],
        ["missing module", "import"],
        ["shape", "tensor"],
        ["learning rate"],
    ]
    groups = merge_groups(centroids, keywords, threshold=0.9)
    assert groups == [[0, 1], [2], [3]]  # 3 is as close as 1 but shares no keyword with 0
    assert merge_groups(centroids, keywords, threshold=0.9, min_shared_keywords=0) == [[0, 1, 3], [2]]
    assert merge_groups(centroids, keywords, threshold=0.9999) == [[0], [1], [2], [3]]


def test_trail_planted_duplicate_is_merged_and_distinct_types_are_not(trail_store, trail_template):
    tax = build(trail_store, TRAIL_PARAMS.model_copy(update={"split_signatures": False}))
    big, half = trail_template.planted
    merged = [t for t in tax.types if len(t.merged_from) > 1]
    assert [sorted(t.merged_from) for t in merged] == [
        sorted([f"{TRAIL_CLUSTERING}:{big}", f"{TRAIL_CLUSTERING}:{half}"])
    ]
    assert len(tax.types) == 20  # 21 clusters, one planted pair merged, nothing else
    assert merged[0].n_insights == int(np.isin(trail_template.labels, [big, half]).sum())


def test_without_merging_the_planted_pair_stays_apart(trail_store):
    tax = build(
        trail_store, TRAIL_PARAMS.model_copy(update={"merge_threshold": 1.0, "split_signatures": False})
    )
    assert len(tax.types) == 21
    assert all(len(t.merged_from) == 1 for t in tax.types)


def test_categories_are_few_per_phase_and_cover_every_type(trail_store):
    tax = build(trail_store, TRAIL_PARAMS)
    cats = {c.id: c for c in tax.categories}
    assert 2 <= len(cats) <= TRAIL_PARAMS.max_categories
    assert {t.category_id for t in tax.types} - {""} == set(cats)  # '' : a type that stands alone
    assert len({c.name for c in cats.values()}) == len(cats)
    for c in cats.values():
        members = [t.name for t in tax.types if t.category_id == c.id]
        assert len(members) >= 2, "a category groups two or more types"
        assert c.name not in members, "a category's name is more general than its types'"
        assert all(name in c.definition for name in members)
    tight = build(
        trail_store, TRAIL_PARAMS.model_copy(update={"max_categories": 2})
    )
    assert len(tight.categories) == 2


def test_group_centroids_puts_near_directions_together():
    rng = np.random.default_rng(0)
    bases = _unit(rng.normal(size=(3, 24)))
    centroids = _unit(np.repeat(bases, 3, axis=0) + 0.1 * rng.normal(size=(9, 24)))
    labels = group_centroids(centroids, np.arange(9, 0, -1.0), max_categories=3)
    assert len(set(labels)) == 3
    assert all(len(set(labels[k * 3 : (k + 1) * 3])) == 1 for k in range(3))
    assert labels[0] == 0  # the heaviest category is numbered first
    assert n_categories(1, 5) == 1 and n_categories(16, 5) == 4 and n_categories(100, 5) == 5


def test_build_params_are_recorded_with_the_snapshot(trail_store):
    params = BuildParams(merge_threshold=0.8, assign_threshold=0.25, max_categories=3, seed=7)
    tax = build(trail_store, params)
    stored = trail_store.query("SELECT params, version, code_version FROM taxonomies WHERE id = ?", [tax.id])[
        0
    ]
    assert BuildParams.model_validate_json(stored[0]) == params
    assert stored[1] == 1 and stored[2].startswith("failatlas")
    again = build(trail_store, params)  # the same inputs: the same snapshot, not a second one
    assert again.id == tax.id and again.version == 1
    other = build(trail_store, params.model_copy(update={"max_categories": 2}))
    assert other.version == 2 and other.id != tax.id
    run = trail_store.query(
        "SELECT stage, status, summary FROM stage_runs WHERE id = ?", [f"taxonomy.build:{tax.id}"]
    )
    assert run[0][:2] == ("taxonomy.build", "ok")
    (rows,) = trail_store.query("SELECT rows FROM stage_runs WHERE id = ?", [tax.stage_run_id])[0]
    assert json.loads(rows)["failure_types"] == len(tax.types) and tax.stage_run_id == f"taxonomy.build:{tax.id}"


def test_a_group_the_labeller_cannot_name_more_generally_is_no_category(trail_store):
    """A labeller that finds no name more general than the types' (None) leaves those types standing alone;
    the categories that remain are numbered without gaps."""
    from failatlas.taxonomy.labelling.offline import OfflineLabeller

    class NamesOnlyTheFirst(OfflineLabeller):
        seen = 0

        def label_category(self, evidence):
            NamesOnlyTheFirst.seen += 1
            return super().label_category(evidence) if NamesOnlyTheFirst.seen == 1 else None

    tax = build(trail_store, TRAIL_PARAMS.model_copy(update={"random_seed": 7}), labeller=NamesOnlyTheFirst())
    assert NamesOnlyTheFirst.seen >= 2
    assert [c.id for c in tax.categories] == ["execution/C1"]
    grouped = [t for t in tax.types if t.category_id]
    assert len(grouped) >= 2 and all(t.category_id == "execution/C1" for t in grouped)
    assert sum(not t.category_id for t in tax.types) >= 2

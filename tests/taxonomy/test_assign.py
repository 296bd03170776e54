"""Assigning new insights to an existing taxonomy without re-clustering."""

from __future__ import annotations

import numpy as np
import pytest

from failatlas.core.errors import InputError, NotFoundError
from failatlas.taxonomy import UNASSIGNED, BuildParams, assign_insights, load_taxonomy, nearest_centroid, prevalence
from failatlas.taxonomy import run as build
from tests.taxonomy.conftest import TRAIL_PARAMS
from tests.taxonomy.fill import add_clustering, add_embeddings, add_insights, insight_id


def test_nearest_centroid_with_threshold():
    centroids = np.eye(3)
    vectors = np.array([[0.9, 0.1, 0], [0, 0.2, 1.0], [1, 1, 1.0]])
    idx, sims = nearest_centroid(vectors, centroids, threshold=0.8)
    assert idx.tolist() == [0, 2, -1]
    assert sims[2] == pytest.approx(1 / np.sqrt(3), abs=1e-6)
    empty_idx, empty_sims = nearest_centroid(vectors, np.zeros((0, 3)), threshold=0.0)
    assert empty_idx.tolist() == [-1, -1, -1] and np.isnan(empty_sims).all()


def test_new_agents_insights_land_in_existing_types(trail_store, trail_template):
    tax = build(trail_store, TRAIL_PARAMS)
    member = next(t for t in tax.types if t.n_insights >= 10).examples[0]
    near_copy = (
        member.text.replace("The system", "The new agent").replace("the system", "the new agent") + " again"
    )
    unrelated = "The football match ended in a draw after extra time."
    rows = [
        {
            "phase": "execution",
            "text": t,
            "run_id": f"new-{k}",
            "task_id": "gaia-new",
            "agent": "new-agent",
            "benchmark": "gaia",
            "origin": "jsonl",
        }
        for k, t in enumerate([near_copy, unrelated])
    ]
    ids = add_insights(trail_store, rows)
    add_embeddings(trail_store, [near_copy, unrelated], trail_template.embed([near_copy, unrelated]))

    summary = assign_insights(trail_store, tax.id)
    assert summary.assigned == {"execution": 1} and summary.unassigned == {"execution": 1}
    got = dict(
        trail_store.query(
            "SELECT insight_id, failure_type_id FROM insight_failure_types"
            " WHERE taxonomy_id = ? AND insight_id IN (?, ?)",
            [tax.id, *ids],
        )
    )
    member_type = trail_store.query(
        "SELECT failure_type_id FROM insight_failure_types WHERE taxonomy_id = ? AND insight_id = ?",
        [tax.id, member.insight_id],
    )[0][0]
    assert got == {ids[0]: member_type, ids[1]: UNASSIGNED}
    # Nothing new: a second call assigns nothing; the new agent now shows up in the per-agent breakdown.
    assert assign_insights(trail_store, tax.id).assigned == {}
    by_agent = prevalence(trail_store, tax.id, by="agent")
    new = by_agent.filter(by_agent["group"] == "new-agent")
    assert sorted(new["failure_type_id"].to_list()) == sorted([member_type, UNASSIGNED])


def test_vectors_can_be_passed_in_and_missing_ones_are_reported(mini_store):
    tax = build(mini_store, BuildParams())
    text = "No module named 'sklearn' when the agent ran evaluate.py"
    add_insights(
        mini_store, [{"phase": "implementation", "text": text, "run_id": "o4", "agent": "openhands"}]
    )
    iid = insight_id("implementation", text)
    with pytest.raises(InputError, match="no embedding"):
        assign_insights(mini_store, tax.id)
    import_type = next(t for t in tax.types if "import" in t.definition.lower() or "module" in t.name.lower())
    summary = assign_insights(mini_store, tax.id, [iid], vectors={iid: np.asarray(import_type.centroid) * 3})
    assert summary.assigned == {"implementation": 1}
    got = mini_store.query(
        "SELECT failure_type_id, method, similarity FROM insight_failure_types"
        " WHERE taxonomy_id = ? AND insight_id = ?",
        [tax.id, iid],
    )[0]
    assert (
        got[0] == import_type.id and got[1] == "nearest_centroid" and got[2] == pytest.approx(1.0, abs=1e-5)
    )
    with pytest.raises(NotFoundError):
        assign_insights(mini_store, "tx-nope")
    with pytest.raises(NotFoundError):
        assign_insights(mini_store, tax.id, ["not-an-insight"])


def test_vectors_are_looked_up_under_the_clusterings_normalisation(store):
    """embed hashes the normalised text: look vectors up the same way, and say so when that is impossible."""
    from failatlas.core.errors import ConfigError
    from tests.taxonomy.fill import add_clustering

    texts = ["ImportError: no module named torch", "CUDA out of memory while training"]
    ids = add_insights(store, [{"phase": "execution", "text": t} for t in texts])
    add_embeddings(store, texts, np.eye(2, 4))  # normalisation 'none'
    add_clustering(store, "cl-none", "execution", ids, [0, 1])
    add_embeddings(store, texts[:1], np.eye(1, 4), normalisation="zzz-v9")  # a normaliser this build lacks
    add_clustering(store, "cl-odd", "design", ids[:1], [0], params={"normalisation": "zzz-v9"})
    tax = build(store, BuildParams(clustering_ids=["cl-none"]))
    assert load_taxonomy(store, tax.id).normalisation == "none" and len(tax.types) == 2
    with pytest.raises(ConfigError, match="zzz-v9"):
        build(store, BuildParams(clustering_ids=["cl-odd"]))


def test_the_taxonomy_uses_the_clusterings_embedding_set_not_the_newest_revision(store):
    """Two revisions of one model in the store: centroids and later assignments come from the vectors the
    clustering was made from (revision r1), not from the newer r2."""
    texts = ["ImportError: no module named torch", "torch is not installed", "CUDA out of memory", "GPU memory gone"]
    ids = add_insights(store, [{"phase": "execution", "text": t} for t in texts])
    r1 = add_embeddings(store, texts, np.eye(8)[[0, 0, 1, 1]], revision="r1")
    r2 = add_embeddings(store, texts, np.eye(8)[[2, 2, 3, 3]], revision="r2")  # the newer revision
    assert r1 != r2
    add_clustering(store, "cl-r1", "execution", ids, [0, 0, 1, 1], embedding_set_id=r1)
    tax = build(store, BuildParams(clustering_ids=["cl-r1"]))
    assert tax.embedding_set_id == r1 and load_taxonomy(store, tax.id).embedding_set_id == r1
    centroids = sorted(tuple(np.round(t.centroid, 6)) for t in tax.types)
    assert centroids == sorted(tuple(v) for v in np.eye(8)[[0, 1]])
    late = "torch module missing"
    (late_id,) = add_insights(store, [{"phase": "execution", "text": late}])
    add_embeddings(store, [late], np.eye(8)[[1]], revision="r1")
    add_embeddings(store, [late], np.eye(8)[[2]], revision="r2")
    assign_insights(store, tax.id, [late_id])
    (type_id,) = store.query("SELECT failure_type_id FROM insight_failure_types WHERE taxonomy_id = ? AND"
                             " insight_id = ?", [tax.id, late_id])[0]
    by_centroid = {int(np.argmax(t.centroid)): t.id for t in tax.types}
    assert type_id == by_centroid[1]

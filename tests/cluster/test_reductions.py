from __future__ import annotations

import numpy as np

from failatlas.cluster import ClusterParams
from failatlas.cluster.reductions import StoreReductionCache, reduction_key, vectors_digest
from failatlas.cluster.writes import MAX_REDUCTIONS as MAX_ENTRIES
from tests.cluster.conftest import cluster_one

FAST = {"normalise": "none", "stability_runs": 2}


def _rows(store, clustering_id):
    return store.query(
        "SELECT insight_id, cluster, x, y FROM cluster_assignments WHERE clustering_id = ? ORDER BY insight_id",
        [clustering_id],
    )


def _cached(store):
    return store.query("SELECT count(*) FROM cluster_reductions")[0][0]


def test_a_repeated_run_reuses_every_umap_result_and_gets_the_same_clustering(blob_store):
    params = ClusterParams(phase="execution", **FAST)
    fresh = cluster_one(blob_store, params, reuse_reductions=False)
    fresh_rows = _rows(blob_store, fresh.id)
    assert fresh.reductions_reused == 0 and _cached(blob_store) == 0  # nothing written without reuse

    first = cluster_one(blob_store, params)
    # main reduction, 2-D map, one reduction per stability re-run (a seed re-run and a resample)
    assert first.reductions_reused == 0 and _cached(blob_store) == 4
    second = cluster_one(blob_store, params)
    assert second.reductions_reused == 4 and _cached(blob_store) == 4
    assert fresh.id == first.id == second.id
    assert _rows(blob_store, second.id) == fresh_rows  # clusters and map identical to UMAP computed afresh
    assert second.stability_ari == fresh.stability_ari


def test_changing_the_clusterer_reuses_the_reductions_changing_the_seed_does_not(blob_store):
    base = cluster_one(blob_store, ClusterParams(phase="execution", **FAST))
    other_size = cluster_one(blob_store, ClusterParams(phase="execution", min_cluster_size=4, **FAST))
    assert other_size.reductions_reused == 4 and other_size.id != base.id
    other_seed = cluster_one(blob_store, ClusterParams(phase="execution", seed=7, **FAST))
    assert other_seed.reductions_reused == 0
    other_dims = cluster_one(blob_store, ClusterParams(phase="execution", n_components=3, **FAST))
    # another reduction; the 2-D map does not depend on n_components and is reused
    assert other_dims.reductions_reused == 1


def test_unseeded_parallel_umap_is_never_cached(blob_store):
    result = cluster_one(blob_store, ClusterParams(phase="design", parallel=True, **FAST))
    assert result.reductions_reused == 0 and _cached(blob_store) == 0


def test_keys_follow_the_vectors_bytes_and_the_parameters():
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    d = vectors_digest(X)
    params = {"n_neighbors": 3, "random_state": 1}
    assert reduction_key(d, "umap", params) == reduction_key(vectors_digest(X.copy()), "umap", dict(params))
    Y = X.copy()
    Y[3, 2] += 1e-6
    assert reduction_key(vectors_digest(Y), "umap", params) != reduction_key(d, "umap", params)
    assert vectors_digest(X.reshape(3, 4)) != d  # same bytes, other shape
    assert reduction_key(d, "umap", {**params, "n_neighbors": 4}) != reduction_key(d, "umap", params)
    assert reduction_key(d, "umap", {**params, "precomputed_knn": (1, 2)}) == reduction_key(d, "umap", params)
    assert reduction_key(d, "umap", {**params, "random_state": None}) is None


def test_the_cache_keeps_only_the_newest_entries(store):
    cache = StoreReductionCache(store)
    for i in range(MAX_ENTRIES + 3):
        cache.put(f"k{i:03d}", "umap", np.full((5, 2), i, dtype=np.float32))
    assert _cached(store) == MAX_ENTRIES
    assert cache.get("k000") is None
    last = cache.get(f"k{MAX_ENTRIES + 2:03d}")
    assert last.shape == (5, 2) and last.dtype == np.float32 and (last == MAX_ENTRIES + 2).all()
    assert (cache.hits, cache.misses) == (1, 1)
    assert f"k{MAX_ENTRIES + 2:03d}" in cache and "k000" not in cache
    assert (cache.hits, cache.misses) == (1, 1)  # a membership test reads no vectors and counts nothing

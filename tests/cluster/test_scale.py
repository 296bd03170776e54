"""The choices that keep clustering affordable at scale: PCA start, a 15-neighbour map, capped stability."""

from __future__ import annotations

import numpy as np
import pytest

from failatlas.cluster.params import ClusterParams
from failatlas.cluster.pipeline import ClusterPipeline
from failatlas.cluster.reducers import LARGE_N
from failatlas.cluster.stability import _scaled, stability
from tests.cluster.conftest import blobs

pytestmark = pytest.mark.slow  # clusters thousands of points: out of the README's quick command


def test_umap_starts_from_pca_from_large_n_on_unless_told():
    assert ClusterParams().reducer_params(LARGE_N - 1)["init"] == "spectral"
    assert ClusterParams().reducer_params(LARGE_N)["init"] == "pca"
    assert ClusterParams(init="spectral").reducer_params(100_000)["init"] == "spectral"


def test_the_map_uses_15_neighbours_at_scale_and_the_reducers_below():
    pipe = ClusterPipeline(reducer_params={"n_neighbors": 50, "n_components": 10, "init": "pca"})
    small, large = pipe._map_params(LARGE_N - 1), pipe._map_params(LARGE_N)
    assert small["n_neighbors"] == 50 and large["n_neighbors"] == 15
    assert small["n_components"] == large["n_components"] == 2 and large["init"] == "pca"


def test_hdbscan_bounds_shrink_with_the_sample():
    assert _scaled({"min_cluster_size": 140, "min_samples": 70, "x": 1}, 0.25) == {
        "min_cluster_size": 35, "min_samples": 18, "x": 1}
    assert _scaled({"min_cluster_size": 10, "min_samples": 5}, 0.1) == {"min_cluster_size": 5, "min_samples": 2}
    assert _scaled({"n_clusters": 4}, 0.1) == {"n_clusters": 4}


def test_stability_above_the_cap_clusters_seeded_samples_of_the_cap():
    X = blobs(200, 3, seed=3)  # 600 items, 3 clear kinds
    pipe = ClusterPipeline(reducer="none", clusterer="hdbscan",
                           clusterer_params={"min_cluster_size": 60, "min_samples": 30}, map_2d=False).fit(X)
    assert pipe.labels_.max() == 2
    capped = stability(X, pipe.labels_, pipe, runs=2, max_items=150)
    assert [(r["kind"], r["n_items"]) for r in capped["runs"]] == [("subsample", 150), ("subsample", 150)]
    assert capped["mean_ari"] > 0.9  # with min_cluster_size 15 on the sample the 3 kinds are found again
    assert stability(X, pipe.labels_, pipe, runs=2, max_items=150)["runs"] == capped["runs"]  # seeded
    uncapped = stability(X, pipe.labels_, pipe, runs=2, max_items=600)
    assert [(r["kind"], r["n_items"]) for r in uncapped["runs"]] == [("seed", 600), ("resample", 480)]


def test_a_large_input_gets_a_pca_started_reduction_and_a_map_from_the_shared_graph():
    X = blobs(LARGE_N // 4, 4, seed=5)
    params = ClusterParams(all_phases=True)
    n = X.shape[0]
    pipe = ClusterPipeline(reducer_params=params.reducer_params(n), clusterer_params=params.clusterer_params(n))
    pipe.fit(X)
    assert pipe.reducer_params["init"] == "pca" and pipe.knn_ is not None and pipe.knn_[0].shape == (n, 50)
    assert pipe.embedding_2d_.shape == (n, 2) and np.isfinite(pipe.embedding_2d_).all()
    blob = np.repeat(np.arange(4), LARGE_N // 4)
    found = pipe.labels_ >= 0
    assert set(blob[found]) == {0, 1, 2, 3}  # every blob found, and no cluster mixes two (leaf may split one)
    assert all(np.unique(blob[pipe.labels_ == c]).size == 1 for c in np.unique(pipe.labels_[found]))


def test_a_second_worker_process_changes_nothing_and_fills_the_same_cache(store):
    from failatlas.cluster.side import SIDE_MIN_N
    from failatlas.core.hashing import text_hashes
    from failatlas.embed.models import resolve_model
    from failatlas.embed.writes import ensure_set, write_vectors
    from tests.cluster.conftest import cluster_one
    from tests.cluster.trail import insight_id

    X = blobs(SIDE_MIN_N // 4 + 25, 4, seed=9)
    texts = [f"statement {i}" for i in range(len(X))]
    with store.write() as conn:
        conn.executemany("INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, 'execution', ?, 1)",
                         [(insight_id("execution", t), t) for t in texts])
        embedding_set = ensure_set(conn, "all-MiniLM-L6-v2", resolve_model("all-MiniLM-L6-v2")[1], "none", X.shape[1])
        write_vectors(conn, embedding_set, text_hashes(texts), X)

    def rows(result):
        return store.query("SELECT insight_id, cluster, x, y FROM cluster_assignments WHERE clustering_id = ?"
                           " ORDER BY insight_id", [result.id])

    params = ClusterParams(phase="execution", normalise="none")
    serial = cluster_one(store, params, workers=1, reuse_reductions=False)
    parallel = cluster_one(store, params, workers=2)  # map + both re-runs in the side process, then cached
    assert parallel.reductions_reused == 0 and store.query("SELECT count(*) FROM cluster_reductions")[0][0] == 4
    assert rows(parallel) == rows(serial) and parallel.stability_ari == serial.stability_ari
    again = cluster_one(store, params, workers=1)
    assert again.reductions_reused == 4 and rows(again) == rows(serial)
    parallel_again = cluster_one(store, params, workers=2)  # cached re-runs are read here, not sent off
    assert parallel_again.reductions_reused == 4 and rows(parallel_again) == rows(serial)

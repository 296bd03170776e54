"""UMAP below 4,096 points in numpy (issue 21): the same graph as umap-learn's, clusters as good, nothing compiled,
and the choice of implementation recorded with the clustering."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from failatlas.cluster import ClusterParams, run
from failatlas.cluster.components import make_clusterer
from failatlas.cluster.pipeline import exact_knn
from failatlas.cluster.reducers import UMAPReducer
from failatlas.cluster.umap_numpy import NUMPY_UMAP_MAX, NumpyUMAP, fuzzy_graph, smooth_knn_dist, supports
from tests.cluster.conftest import blobs


def _ari(a, b) -> float:
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(a, b))


def test_the_graph_is_umap_learns_own():
    from umap.umap_ import fuzzy_simplicial_set

    from failatlas.cluster.jit import enable_numba_cache

    enable_numba_cache()
    X = blobs(60, 5, dim=32, seed=3, spread=0.3)
    k = 20
    indices, dists = exact_knn(X, k)
    theirs, sigmas, rhos = fuzzy_simplicial_set(X, k, np.random.RandomState(0), "cosine",
                                                knn_indices=indices, knn_dists=dists)[:3]
    sigma, rho = smooth_knn_dist(dists, float(k))
    assert np.allclose(rho, rhos, atol=1e-6)
    assert np.allclose(sigma, sigmas, rtol=1e-3, atol=1e-6)
    ours = fuzzy_graph(indices, dists, k)
    assert (ours != ours.T).nnz == 0  # symmetric
    assert np.allclose(ours.toarray(), theirs.toarray(), atol=1e-4)


def test_memberships_of_each_point_sum_to_log2_k():
    rng = np.random.default_rng(0)
    d = np.sort(rng.uniform(0.1, 1.0, size=(50, 16)), axis=1)
    d[:, 0] = 0.0  # itself
    sigma, rho = smooth_knn_dist(d, 16.0)
    assert np.allclose(rho, d[:, 1])
    sums = np.exp(-np.maximum(d[:, 1:] - rho[:, None], 0) / sigma[:, None]).sum(axis=1)
    assert np.allclose(sums, np.log2(16), atol=1e-3)


def test_clear_groups_come_out_as_clusters_as_well_as_with_umap_learn_the_same_for_the_same_seed():
    import umap

    X = blobs(80, 6, dim=48, seed=5, spread=0.3)
    truth = np.repeat(np.arange(6), 80)
    params = ClusterParams(all_phases=True)
    n = len(X)
    reducer_params, clusterer_params = params.reducer_params(n), params.clusterer_params(n)
    first = NumpyUMAP(**{**reducer_params, "random_state": 7}).fit_transform(X)
    again = NumpyUMAP(**{**reducer_params, "random_state": 7}).fit_transform(X)
    other = NumpyUMAP(**{**reducer_params, "random_state": 8}).fit_transform(X)
    assert first.dtype == np.float32 and first.shape == (n, reducer_params["n_components"])
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    scores = {"numpy": [], "umap-learn": []}
    for seed in (1, 2, 3):
        for name, reducer in (("numpy", NumpyUMAP), ("umap-learn", umap.UMAP)):
            reduced = reducer(**{**reducer_params, "random_state": seed}).fit_transform(X)
            scores[name].append(_ari(truth, make_clusterer("hdbscan", **clusterer_params).fit_predict(reduced)))
    assert np.mean(scores["numpy"]) >= 0.85
    assert np.mean(scores["numpy"]) >= np.mean(scores["umap-learn"]) - 0.1, scores


def test_a_disconnected_graph_or_identical_points_still_give_a_layout():
    X = np.vstack([blobs(30, 1, dim=8, seed=1, spread=0.01), -blobs(30, 1, dim=8, seed=1, spread=0.01)])
    Y = NumpyUMAP(n_neighbors=5, n_components=3, metric="cosine", random_state=0).fit_transform(X)
    assert np.isfinite(Y).all()
    far = np.linalg.norm(Y[:30].mean(0) - Y[30:].mean(0))
    assert far > np.linalg.norm(Y[:30] - Y[:30].mean(0), axis=1).max()  # two islands stay apart
    same = NumpyUMAP(n_neighbors=5, n_components=2, metric="euclidean",
                     random_state=0).fit_transform(np.ones((12, 4), np.float32))
    assert np.isfinite(same).all()
    with pytest.raises(ValueError, match="at least 3"):
        NumpyUMAP().fit_transform(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="manhattan"):
        NumpyUMAP(metric="manhattan").fit_transform(np.ones((5, 4), np.float32))


def test_which_umap_runs_is_decided_by_size_metric_and_options():
    base = {"n_neighbors": 15, "n_components": 10, "min_dist": 0.0, "metric": "cosine", "random_state": 1}
    assert supports(NUMPY_UMAP_MAX - 1, base)
    assert not supports(NUMPY_UMAP_MAX, base)
    assert not supports(100, {**base, "metric": "manhattan"})
    assert not supports(100, {**base, "target_weight": 0.5})  # an option only umap-learn knows
    assert UMAPReducer.implementation(100, base) == "numpy"
    assert UMAPReducer.implementation(NUMPY_UMAP_MAX, base) == "umap-learn"


def test_a_small_clustering_in_a_fresh_process_compiles_nothing_and_never_imports_umap_learn(tmp_path):
    code = """
import json, sys
import numpy as np
from numba.core import event
compiled = []
class Count(event.Listener):
    def on_start(self, ev): pass
    def on_end(self, ev): compiled.append(1)
event.register("numba:compile", Count())
from failatlas.cluster import ClusterParams
from failatlas.cluster.pipeline import ClusterPipeline
X = np.random.default_rng(0).normal(size=(700, 48)).astype(np.float32)
p = ClusterParams(all_phases=True)
pipe = ClusterPipeline(reducer_params=p.reducer_params(700), clusterer_params=p.clusterer_params(700)).fit(X)
print(json.dumps({"compiled": len(compiled), "umap": "umap" in sys.modules, "pynndescent": "pynndescent" in
      sys.modules, "impl": pipe.umap_implementation_, "map": pipe.embedding_2d_.shape[1]}))
"""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "empty-numba-cache"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"compiled": 0, "umap": False, "pynndescent": False, "impl": "numpy", "map": 2}


def test_the_clustering_records_which_umap_ran(blob_store):
    result = run(blob_store, ClusterParams(all_phases=True, normalise="none", stability_runs=0))
    (params,) = [json.loads(r[0]) for r in blob_store.query("SELECT params FROM clusterings WHERE id = ?",
                                                             [result.clusterings[0].id])]
    assert params["umap_implementation"] == "numpy"
    assert params["reducer_used"] == "umap"


def test_reruns_and_later_work_keep_the_clusterings_own_implementation():
    from failatlas.cluster.pipeline import ClusterPipeline
    from failatlas.cluster.stability import plan_reruns
    from failatlas.cluster.stage import pipeline_of

    params = ClusterParams(all_phases=True, stability_runs=2)
    for n, expected in ((4500, "umap-learn"), (3000, "numpy")):
        pipe = ClusterPipeline(reducer_params=params.reducer_params(n), clusterer_params=params.clusterer_params(n))
        for max_items in (None, 2000):  # a resample of 3,600 or a subsample of 2,000 stays with the main UMAP
            for rerun in plan_reruns(n, pipe, runs=2, max_items=max_items):
                rp = rerun.params["reducer_params"]
                assert UMAPReducer.implementation(len(rerun.idx), rp) == expected, (n, max_items, rerun.kind)
    resolved = {**params.resolve(300), "reducer_used": "umap"}
    old = pipeline_of(resolved)  # recorded before the numpy UMAP existed: made by umap-learn
    assert UMAPReducer.implementation(300, old._reducer_params(old.random_state)) == "umap-learn"
    new = pipeline_of({**resolved, "umap_implementation": "numpy"})
    assert UMAPReducer.implementation(300, new._reducer_params(new.random_state)) == "numpy"
    fresh = pipeline_of(params.resolve(300))  # a new run: chosen by size
    assert "implementation" not in (fresh.reducer_params or {})
    # a pin never changes the cache key of the same result
    X = blobs(40, 3, dim=16, seed=2)
    assert old.reduction_key(X) != new.reduction_key(X)
    assert new.reduction_key(X) == fresh.reduction_key(X)  # pinned numpy = chosen numpy at this size


def test_options_numpy_does_not_compute_go_to_umap_learn_and_bad_values_are_refused():
    base = {"n_neighbors": 15, "n_components": 10, "min_dist": 0.0, "metric": "cosine", "random_state": 1}
    assert UMAPReducer.implementation(100, {**base, "init": "tswspectral"}) == "umap-learn"
    assert UMAPReducer.implementation(100, {**base, "init": "pca"}) == "numpy"
    assert UMAPReducer.implementation(9000, {**base, "implementation": "numpy"}) == "numpy"
    from failatlas.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown UMAP implementation"):
        UMAPReducer.implementation(100, {**base, "implementation": "cuml"})
    X = blobs(10, 2, dim=8)
    X[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        NumpyUMAP(n_neighbors=5).fit_transform(X)

"""Compile UMAP's and PyNNDescent's numba code ahead of a user's first clustering (`scripts/setup.sh`)."""

from __future__ import annotations

from failatlas.cluster.jit import enable_numba_cache, numba_cache_stats
from failatlas.cluster.params import ClusterParams
from failatlas.cluster.pipeline import ClusterPipeline

WARMUP_EPOCHS = 5


def precompile() -> dict[str, int]:
    """Compile (or load from numba's file cache) every UMAP and PyNNDescent code path a clustering takes, by
    fitting on random points (below 4,096 points UMAP runs in numpy and compiles nothing: cluster/umap_numpy.py):
    our exact neighbour graph, the spectral and the PCA start, the 10-D reduction and the 2-D map (deferred or
    not) from 4,096 on; PyNNDescent's
    neighbour descent above EXACT_KNN_MAX (its functions that take the distance function as an argument cannot
    be cached by numba and still compile once per process there). `scripts/setup.sh` calls it so that a user's
    first clustering does not compile. Returns `numba_cache_stats()`."""
    import numpy as np

    enable_numba_cache()
    rng = np.random.default_rng(0)
    for n, n_used in ((4500, 4500), (4500, 10_000)):  # spectral start; PCA start
        X = rng.normal(size=(n, 32)).astype(np.float32)
        params = ClusterParams(all_phases=True, stability_runs=0)
        # a few epochs compile the same functions as the full number, which only loops longer
        ClusterPipeline(reducer_params={**params.reducer_params(n_used), "n_epochs": WARMUP_EPOCHS},
                        clusterer_params=params.clusterer_params(n)).fit(X)
    from umap.umap_ import nearest_neighbors

    X = rng.normal(size=(4500, 32)).astype(np.float32)
    nearest_neighbors(X, 15, "cosine", {}, True, np.random.RandomState(0), n_jobs=1)  # what runs above EXACT_KNN_MAX
    return numba_cache_stats()

"""Compile UMAP's and PyNNDescent's numba code ahead of a user's first clustering (`scripts/setup.sh`)."""

from __future__ import annotations

from failatlas.cluster.jit import enable_numba_cache, numba_cache_stats
from failatlas.cluster.params import ClusterParams
from failatlas.cluster.pipeline import ClusterPipeline


def precompile() -> dict[str, int]:
    """Compile (or load from numba's file cache) every UMAP and PyNNDescent code path a clustering at scale takes
    (neighbour descent above 4,096 points, PCA start, 10-D reduction and 2-D map from a shared graph), by fitting
    them on 4,500 random points; `scripts/setup.sh` calls it so that a user's first clustering does not compile.
    Returns `numba_cache_stats()`."""
    import numpy as np

    enable_numba_cache()
    X = np.random.default_rng(0).normal(size=(4500, 32)).astype(np.float32)
    for n_used in (len(X), 10_000):  # the spectral start below LARGE_N, PCA from there on
        params = ClusterParams(all_phases=True, stability_runs=0)
        ClusterPipeline(reducer_params=params.reducer_params(n_used),
                        clusterer_params=params.clusterer_params(len(X))).fit(X)
    return numba_cache_stats()

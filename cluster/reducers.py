"""The built-in reducers (umap, pca, none), each with its adaptive defaults."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from failatlas.cluster.components import REDUCERS, Reducer, adaptive
from failatlas.core.errors import ConfigError, MissingDependencyError

# From this many insights on, UMAP starts from PCA instead of its spectral embedding: at 44,000 insights the
# spectral start alone took 65-120 s of a 100-160 s fit (an eigensolver on the neighbour graph), PCA's under a
# second, and the clusters agreed as well with the known kinds (ARI 0.333 vs 0.298, benchmarks/RESULTS.md).
# Below it the spectral start is cheap and the measured quality (docs/quality.md) was obtained with it.
LARGE_N = 10_000
IMPLEMENTATIONS = ("numpy", "umap-learn")


def adaptive_n_neighbors(n: int) -> int:
    """UMAP's neighbourhood: about sqrt(n), within [15, 50], and below n. Larger neighbourhoods keep the
    global shape (kinds of error) rather than local detail (which task the text came from)."""
    return max(2, min(n - 1, max(15, min(50, round(math.sqrt(n))))))


def adaptive_init(n: int) -> str:
    """UMAP's starting layout: its default spectral embedding below LARGE_N insights, PCA from there on."""
    return "pca" if n >= LARGE_N else "spectral"


class IdentityReducer:
    """Keeps the vectors as they are (cluster the raw embeddings)."""

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float32)


def _umap_defaults(n: int, options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "n_neighbors": options.get("n_neighbors") or adaptive_n_neighbors(n),
        "n_components": options.get("n_components") or max(2, min(10, n - 2)),
        "min_dist": options.get("min_dist", 0.0),
        "metric": options.get("metric", "cosine"),
        "init": options.get("init") or adaptive_init(n),
        "random_state": None if options.get("parallel") else options.get("seed"),
    }


class UMAPReducer:
    """The reducer `umap`: `NumpyUMAP` (no numba to compile) below NUMPY_UMAP_MAX points where it supports the
    parameters, umap-learn (imported on first use, its numba code switched to the file cache) otherwise. The
    parameter `implementation` ('numpy' or 'umap-learn') pins one: the stability re-runs of a clustering and the
    work `cluster finish` does later use the implementation of the clustering itself, whatever their size.
    After `fit_transform`, `implementation_` says which ran."""

    def __init__(self, **params: Any) -> None:
        self.params = params

    @staticmethod
    def unpinned(params: Mapping[str, Any]) -> dict[str, Any]:
        """`params` without the `implementation` pin: UMAP's own parameters."""
        return {k: v for k, v in params.items() if k != "implementation"}

    @staticmethod
    def implementation(n: int, params: Mapping[str, Any]) -> str:
        """Which UMAP fits `n` points with `params`: 'numpy' or 'umap-learn'. Raises ConfigError for an unknown
        pinned `implementation`."""
        from failatlas.cluster.umap_numpy import supports

        rest = UMAPReducer.unpinned(params)
        pinned = params.get("implementation")
        if pinned is None:
            return "numpy" if supports(n, rest) else "umap-learn"
        if pinned not in IMPLEMENTATIONS:
            raise ConfigError(f"unknown UMAP implementation {pinned!r}",
                              hint=f"use one of: {', '.join(IMPLEMENTATIONS)}")
        return "numpy" if pinned == "numpy" and supports(n, rest, any_size=True) else "umap-learn"

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        self.implementation_ = self.implementation(len(X), self.params)
        params = self.unpinned(self.params)
        if self.implementation_ == "numpy":
            from failatlas.cluster.umap_numpy import NumpyUMAP

            return NumpyUMAP(**params).fit_transform(X)
        try:
            import umap
        except ImportError:
            raise MissingDependencyError("umap-learn", "mining") from None
        from failatlas.cluster.jit import enable_numba_cache

        enable_numba_cache()
        return umap.UMAP(**params).fit_transform(X)


@REDUCERS.register("umap")
@adaptive(_umap_defaults)
def umap_reducer(
    *,
    n_neighbors: int = 15,
    n_components: int = 5,
    min_dist: float = 0.0,
    metric: str = "cosine",
    random_state: int | None = None,
    **extra: Any,
) -> Reducer:
    # a seed needs one thread: umap ignores random_state when it runs in parallel
    return UMAPReducer(
        n_neighbors=n_neighbors,
        n_components=n_components,
        min_dist=min_dist,
        metric=metric,
        random_state=random_state,
        n_jobs=1 if random_state is not None else -1,
        **extra,
    )


def _pca_defaults(n: int, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"n_components": options.get("n_components") or min(50, n), "random_state": options.get("seed")}


@REDUCERS.register("pca")
@adaptive(_pca_defaults)
def pca_reducer(*, n_components: int = 50, random_state: int | None = None) -> Reducer:
    from sklearn.decomposition import PCA

    return PCA(n_components=n_components, random_state=random_state)


@REDUCERS.register("none")
def no_reducer(**_: Any) -> Reducer:
    return IdentityReducer()

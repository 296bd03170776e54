"""Reducers and clusterers, registered by name.

Each factory takes keyword hyperparameters (recorded verbatim in `clusterings.params`) and returns an
object that follows scikit-learn's conventions: reducers have `fit_transform(X)`, clusterers
`fit_predict(X)` returning -1 for outliers. Heavy imports (umap, hdbscan, fast_hdbscan) happen inside
the factories.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from failatlas.core.errors import ConfigError, MissingDependencyError


@runtime_checkable
class Reducer(Protocol):
    def fit_transform(self, X: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class Clusterer(Protocol):
    def fit_predict(self, X: np.ndarray) -> np.ndarray: ...


class IdentityReducer:
    """Keeps the vectors as they are (cluster the raw embeddings)."""

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float32)


def _umap(
    *,
    n_neighbors: int = 15,
    n_components: int = 5,
    min_dist: float = 0.0,
    metric: str = "cosine",
    random_state: int | None = None,
    **extra: Any,
) -> Reducer:
    try:
        import umap
    except ImportError:
        raise MissingDependencyError("umap-learn", "mining") from None
    from failatlas.cluster.jit import enable_numba_cache

    enable_numba_cache()
    # a seed needs one thread: umap ignores random_state when it runs in parallel
    return umap.UMAP(
        n_neighbors=n_neighbors,
        n_components=n_components,
        min_dist=min_dist,
        metric=metric,
        random_state=random_state,
        n_jobs=1 if random_state is not None else -1,
        **extra,
    )


def _pca(*, n_components: int = 50, random_state: int | None = None) -> Reducer:
    from sklearn.decomposition import PCA

    return PCA(n_components=n_components, random_state=random_state)


def _none(**_: Any) -> Reducer:
    return IdentityReducer()


def _hdbscan(
    *,
    min_cluster_size: int = 10,
    min_samples: int | None = None,
    cluster_selection_method: str = "eom",
    cluster_selection_epsilon: float = 0.0,
    metric: str = "euclidean",
    random_state: int | None = None,
    **extra: Any,
) -> Clusterer:
    try:
        import hdbscan
    except ImportError:
        raise MissingDependencyError("hdbscan", "mining") from None
    return hdbscan.HDBSCAN(
        min_cluster_size=min_cluster_size,
        min_samples=min_samples,
        metric=metric,
        cluster_selection_method=cluster_selection_method,
        cluster_selection_epsilon=cluster_selection_epsilon,
        core_dist_n_jobs=1,
        **extra,
    )


def _fast_hdbscan(
    *,
    min_cluster_size: int = 10,
    min_samples: int | None = None,
    cluster_selection_method: str = "eom",
    cluster_selection_epsilon: float = 0.0,
    random_state: int | None = None,
    **extra: Any,
) -> Clusterer:
    try:
        import fast_hdbscan
    except ImportError:
        raise MissingDependencyError("fast-hdbscan", "mining") from None
    return fast_hdbscan.HDBSCAN(
        min_cluster_size=min_cluster_size,
        min_samples=min_samples,
        cluster_selection_method=cluster_selection_method,
        cluster_selection_epsilon=cluster_selection_epsilon,
        reproducible=True,
        **extra,
    )


def _kmeans(*, n_clusters: int = 20, random_state: int | None = None, n_init: int = 10) -> Clusterer:
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=n_clusters, random_state=random_state, n_init=n_init)


def _agglomerative(
    *, n_clusters: int | None = 20, linkage: str = "ward", metric: str = "euclidean",
    distance_threshold: float | None = None, random_state: int | None = None,
) -> Clusterer:
    from sklearn.cluster import AgglomerativeClustering

    return AgglomerativeClustering(n_clusters=None if distance_threshold is not None else n_clusters,
                                   linkage=linkage, metric=metric, distance_threshold=distance_threshold)


REDUCERS: dict[str, Callable[..., Reducer]] = {"umap": _umap, "pca": _pca, "none": _none}
CLUSTERERS: dict[str, Callable[..., Clusterer]] = {
    "hdbscan": _hdbscan,
    "fast_hdbscan": _fast_hdbscan,
    "kmeans": _kmeans,
    "agglomerative": _agglomerative,
}


def make_reducer(name: str, **params: Any) -> Reducer:
    """The reducer registered as `name`, built with `params`. Raises ConfigError for an unknown name."""
    try:
        factory = REDUCERS[name]
    except KeyError:
        raise ConfigError(f"unknown reducer {name!r}", hint=f"choose one of {sorted(REDUCERS)}") from None
    return factory(**params)


def make_clusterer(name: str, **params: Any) -> Clusterer:
    """The clusterer registered as `name`, built with `params`. Raises ConfigError for an unknown name."""
    try:
        factory = CLUSTERERS[name]
    except KeyError:
        raise ConfigError(f"unknown clusterer {name!r}", hint=f"choose one of {sorted(CLUSTERERS)}") from None
    return factory(**params)

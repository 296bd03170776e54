"""The built-in clusterers (hdbscan, fast_hdbscan, kmeans, agglomerative), each with its adaptive defaults."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from failatlas.cluster.components import CLUSTERERS, Clusterer, adaptive
from failatlas.core.errors import MissingDependencyError


def adaptive_min_cluster_size(n: int) -> int:
    """HDBSCAN's smallest cluster: about 2/3 sqrt(n), at least 5 (15 for 500 insights, 211 for 100,000). Kinds
    of failure grow more slowly than the number of insights, so the bound grows sublinearly."""
    return max(5, round(2 * math.sqrt(n) / 3)) if n >= 10 else max(2, n // 2)


def adaptive_min_samples(min_cluster_size: int) -> int:
    """HDBSCAN's density smoothing: half the smallest cluster, so fewer borderline texts become outliers."""
    return max(2, min_cluster_size // 2)


def adaptive_n_clusters(n: int) -> int:
    """A cluster count for clusterers that need one: about sqrt(n / 2), within [2, n]."""
    return max(2, min(n, round(math.sqrt(n / 2))))


def _hdbscan_defaults(n: int, options: Mapping[str, Any]) -> dict[str, Any]:
    mcs = options.get("min_cluster_size") or adaptive_min_cluster_size(n)
    return {
        "min_cluster_size": mcs,
        "min_samples": options.get("min_samples") or adaptive_min_samples(mcs),
        # leaf: the finest clusters of at least min_cluster_size; "eom" on these texts swings between 5 and 35
        # clusters from one seed to the next (docs/quality.md)
        "cluster_selection_method": options.get("cluster_selection_method") or "leaf",
    }


@CLUSTERERS.register("hdbscan")
@adaptive(_hdbscan_defaults)
def hdbscan_clusterer(
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


@CLUSTERERS.register("fast_hdbscan")
@adaptive(_hdbscan_defaults)
def fast_hdbscan_clusterer(
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


def _kmeans_defaults(n: int, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"n_clusters": options.get("n_clusters") or adaptive_n_clusters(n), "random_state": options.get("seed")}


@CLUSTERERS.register("kmeans")
@adaptive(_kmeans_defaults)
def kmeans_clusterer(*, n_clusters: int = 20, random_state: int | None = None, n_init: int = 10) -> Clusterer:
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=n_clusters, random_state=random_state, n_init=n_init)


def _agglomerative_defaults(n: int, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"n_clusters": options.get("n_clusters") or adaptive_n_clusters(n)}


@CLUSTERERS.register("agglomerative")
@adaptive(_agglomerative_defaults)
def agglomerative_clusterer(
    *, n_clusters: int | None = 20, linkage: str = "ward", metric: str = "euclidean",
    distance_threshold: float | None = None, random_state: int | None = None,
) -> Clusterer:
    from sklearn.cluster import AgglomerativeClustering

    return AgglomerativeClustering(n_clusters=None if distance_threshold is not None else n_clusters,
                                   linkage=linkage, metric=metric, distance_threshold=distance_threshold)

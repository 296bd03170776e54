"""Clustering parameters: what the user may set, and the defaults that adapt to the number of insights.

`ClusterParams.resolve(n)` turns every `None` into a concrete value; the resolved dict is what
`clusterings.params` records, so a clustering can be rebuilt from its row alone.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from failatlas.embed.models import DEFAULT_MODEL
from pydantic import BaseModel, Field


def adaptive_n_neighbors(n: int) -> int:
    """UMAP's neighbourhood: about sqrt(n), within [15, 50], and below n. Larger neighbourhoods keep the
    global shape (kinds of error) rather than local detail (which task the text came from)."""
    return max(2, min(n - 1, max(15, min(50, round(math.sqrt(n))))))


def adaptive_min_cluster_size(n: int) -> int:
    """HDBSCAN's smallest cluster: about 2/3 sqrt(n), at least 5 (15 for 500 insights, 211 for 100,000). Kinds
    of failure grow more slowly than the number of insights, so the bound grows sublinearly."""
    return max(5, round(2 * math.sqrt(n) / 3)) if n >= 10 else max(2, n // 2)


# From this many insights on, UMAP starts from PCA instead of its spectral embedding: at 44,000 insights the
# spectral start alone took 65-120 s of a 100-160 s fit (an eigensolver on the neighbour graph), PCA's under a
# second, and the clusters agreed as well with the known kinds (ARI 0.333 vs 0.298, benchmarks/RESULTS.md).
# Below it the spectral start is cheap and the measured quality (docs/quality.md) was obtained with it.
LARGE_N = 10_000


def adaptive_init(n: int) -> str:
    """UMAP's starting layout: its default spectral embedding below LARGE_N insights, PCA from there on."""
    return "pca" if n >= LARGE_N else "spectral"


def adaptive_min_samples(min_cluster_size: int) -> int:
    """HDBSCAN's density smoothing: half the smallest cluster, so fewer borderline texts become outliers."""
    return max(2, min_cluster_size // 2)


class ClusterParams(BaseModel):
    """Everything a clustering run depends on. `None` means "adapt to the data"; see `resolve`."""

    phase: str | None = None  # one phase; None with all_phases=False means "each phase in turn"
    all_phases: bool = False  # cluster every insight together, across phases
    embed_model: str = DEFAULT_MODEL
    normalise: str = "none"
    seed: int = 42
    reducer: str = "umap"
    n_neighbors: int | None = None
    n_components: int | None = None
    min_dist: float = 0.0
    metric: str = "cosine"
    init: Literal["spectral", "pca", "tswspectral", "random"] | None = None  # None: adaptive_init(n)
    clusterer: str = "hdbscan"
    min_cluster_size: int | None = None
    min_samples: int | None = None
    # leaf: the finest clusters of at least min_cluster_size; "eom" on these texts swings between 5 and 35
    # clusters from one seed to the next (docs/quality.md)
    cluster_selection_method: Literal["eom", "leaf"] = "leaf"
    n_clusters: int | None = None  # only for clusterers that take a count (kmeans, agglomerative)
    reassign_outliers: bool = False
    parallel: bool = False  # unseeded multi-threaded UMAP: faster at scale, not reproducible
    map_2d: bool = True
    stability_runs: int = Field(default=2, ge=0)  # re-runs: alternately another seed and an 80% resample
    resample_fraction: float = Field(default=0.8, gt=0.0, le=1.0)
    # above this many insights each re-run clusters a seeded sample of this size (cluster sizes scaled to it)
    stability_max_items: int = Field(default=10_000, ge=100)

    def reducer_params(self, n: int) -> dict[str, Any]:
        if self.reducer == "umap":
            return {
                "n_neighbors": self.n_neighbors or adaptive_n_neighbors(n),
                "n_components": self.n_components or max(2, min(10, n - 2)),
                "min_dist": self.min_dist,
                "metric": self.metric,
                "init": self.init or adaptive_init(n),
                "random_state": None if self.parallel else self.seed,
            }
        if self.reducer == "pca":
            return {"n_components": self.n_components or min(50, n), "random_state": self.seed}
        return {}

    def clusterer_params(self, n: int) -> dict[str, Any]:
        if self.clusterer in ("hdbscan", "fast_hdbscan"):
            mcs = self.min_cluster_size or adaptive_min_cluster_size(n)
            return {
                "min_cluster_size": mcs,
                "min_samples": self.min_samples or adaptive_min_samples(mcs),
                "cluster_selection_method": self.cluster_selection_method,
            }
        k = self.n_clusters or max(2, min(n, round(math.sqrt(n / 2))))
        params: dict[str, Any] = {"n_clusters": k}
        if self.clusterer == "kmeans":
            params["random_state"] = self.seed
        return params

    def resolve(self, n: int) -> dict[str, Any]:
        """Every parameter with adaptive defaults filled in for `n` insights (what gets recorded)."""
        return {
            **self.model_dump(),
            "n_insights": n,
            "reducer_params": self.reducer_params(n),
            "clusterer_params": self.clusterer_params(n),
        }

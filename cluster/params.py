"""Clustering parameters: what the user may set. `None` means "adapt to the data": each reducer and clusterer
fills in its own adaptive defaults (`defaults(n, options)`, cluster/components.py).

`ClusterParams.resolve(n)` turns every `None` into a concrete value; the resolved dict is what
`clusterings.params` records, so a clustering can be rebuilt from its row alone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from failatlas.cluster.components import clusterer_defaults, reducer_defaults
from failatlas.embed.models import DEFAULT_MODEL

# Fields that decide how a run executes but not its result; they are not part of the recorded clustering.
EXECUTION_ONLY = frozenset({"embedding_set_id", "reuse_reductions", "workers"})


class ClusterParams(BaseModel):
    """Everything a clustering run depends on. `None` means "adapt to the data"; see `resolve`.

    Which insights: one `phase`, every insight together (`all_phases`), or, with neither, one clustering per
    phase present in the store. Which vectors: `embedding_set_id`, else the set of `embed_model` (at the revision
    on this machine) and `normalise`."""

    phase: str | None = None
    all_phases: bool = False  # cluster every insight together, across phases
    embed_model: str = DEFAULT_MODEL
    normalise: str = "none"
    embedding_set_id: str | None = None  # an embedding_sets.id; overrides embed_model and normalise
    seed: int = 42
    reducer: str = "umap"
    n_neighbors: int | None = None
    n_components: int | None = None
    min_dist: float = 0.0
    metric: str = "cosine"
    init: Literal["spectral", "pca", "tswspectral", "random"] | None = None  # None: the reducer adapts it to n
    clusterer: str = "hdbscan"
    min_cluster_size: int | None = None
    min_samples: int | None = None
    cluster_selection_method: Literal["eom", "leaf"] = "leaf"
    n_clusters: int | None = None  # only for clusterers that take a count (kmeans, agglomerative)
    reassign_outliers: bool = False
    parallel: bool = False  # unseeded multi-threaded UMAP: faster at scale, not reproducible
    map_2d: bool = True
    stability_runs: int = Field(default=2, ge=0)  # re-runs: alternately another seed and an 80% resample
    resample_fraction: float = Field(default=0.8, gt=0.0, le=1.0)
    # above this many insights each re-run clusters a seeded sample of this size (cluster sizes scaled to it)
    stability_max_items: int = Field(default=10_000, ge=100)
    # read and write seeded UMAP results in cluster_reductions (same result either way)
    reuse_reductions: bool = True
    # 2: the 2-D map and the stability re-runs in a second process (default: cluster/side.py decides)
    workers: int | None = None

    def options(self) -> dict[str, Any]:
        """The fields that decide the result (what components adapt to and what `clusterings.params` keeps)."""
        return self.model_dump(exclude=set(EXECUTION_ONLY))

    def reducer_params(self, n: int) -> dict[str, Any]:
        return reducer_defaults(self.reducer, n, self.options())

    def clusterer_params(self, n: int) -> dict[str, Any]:
        return clusterer_defaults(self.clusterer, n, self.options())

    def resolve(self, n: int) -> dict[str, Any]:
        """Every parameter with adaptive defaults filled in for `n` insights (what gets recorded)."""
        return {
            **self.options(),
            "n_insights": n,
            "reducer_params": self.reducer_params(n),
            "clusterer_params": self.clusterer_params(n),
        }

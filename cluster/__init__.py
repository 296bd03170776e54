"""Cluster stage: per-phase UMAP + HDBSCAN over cached embeddings, seeded, with stability scores, a 2-D
map, and evaluation against human labels."""

from failatlas.cluster.components import CLUSTERERS, REDUCERS, make_clusterer, make_reducer
from failatlas.cluster.metrics import agreement, quality_metrics
from failatlas.cluster.params import ClusterParams
from failatlas.cluster.pipeline import ClusterPipeline, reassign_to_nearest
from failatlas.cluster.stability import stability
from failatlas.cluster.stage import (
    ClusteringResult,
    evaluate_clustering,
    list_clusterings,
    majority_labels,
    run_clustering,
    run_clustering_per_phase,
)

__all__ = [
    "CLUSTERERS",
    "REDUCERS",
    "ClusterParams",
    "ClusterPipeline",
    "ClusteringResult",
    "agreement",
    "evaluate_clustering",
    "list_clusterings",
    "majority_labels",
    "make_clusterer",
    "make_reducer",
    "quality_metrics",
    "reassign_to_nearest",
    "run_clustering",
    "run_clustering_per_phase",
    "stability",
]

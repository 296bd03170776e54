"""Cluster stage: per-phase UMAP + HDBSCAN over cached embeddings, seeded, with stability scores, a 2-D
map, and evaluation against human labels."""

from cluster.components import CLUSTERERS, REDUCERS, make_clusterer, make_reducer
from cluster.metrics import agreement, quality_metrics
from cluster.params import ClusterParams
from cluster.pipeline import ClusterPipeline, reassign_to_nearest
from cluster.stability import stability
from cluster.stage import (
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

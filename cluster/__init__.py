"""Cluster stage: per-phase UMAP + HDBSCAN over the vectors of one embedding set, seeded, with stability scores,
a 2-D map, and evaluation against human labels.

    result = failatlas.cluster.run(store, ClusterParams())   # one clustering per phase
"""

# the built-in reducers and clusterers register themselves on import
from failatlas.cluster import clusterers as clusterers
from failatlas.cluster import reducers as reducers
from failatlas.cluster.components import (
    CLUSTERERS,
    REDUCERS,
    Clusterer,
    Reducer,
    adaptive,
    clusterer_defaults,
    make_clusterer,
    make_reducer,
    reducer_defaults,
)
from failatlas.cluster.metrics import agreement, quality_metrics
from failatlas.cluster.params import ClusterParams
from failatlas.cluster.pipeline import ClusterPipeline, reassign_to_nearest
from failatlas.cluster.stability import stability
from failatlas.cluster.stage import (
    ClusteringResult,
    ClusterResult,
    evaluate_clustering,
    list_clusterings,
    majority_labels,
    run,
)

__all__ = [
    "CLUSTERERS",
    "REDUCERS",
    "ClusterParams",
    "ClusterPipeline",
    "ClusterResult",
    "Clusterer",
    "ClusteringResult",
    "Reducer",
    "adaptive",
    "agreement",
    "clusterer_defaults",
    "evaluate_clustering",
    "list_clusterings",
    "majority_labels",
    "make_clusterer",
    "make_reducer",
    "quality_metrics",
    "reassign_to_nearest",
    "reducer_defaults",
    "run",
    "stability",
]

"""Every write of the cluster stage: clusterings with their assignments, evaluations, cached reductions."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from failatlas.core.store import Store

MAX_REDUCTIONS = 24  # most recent reductions kept per store (about 4 MB each at 100k insights, 10 dims)


def write_clustering(store: Store, row: dict[str, Any], assignments: pa.Table) -> None:
    """Replace clustering `row["id"]` (its `clusterings` row, assignments and evaluations) in one transaction.
    `assignments` has insight_id, cluster, reassigned, probability, x, y."""
    clustering_id = row["id"]
    with store.write() as conn:
        conn.execute("DELETE FROM cluster_assignments WHERE clustering_id = ?", [clustering_id])
        conn.execute("DELETE FROM cluster_evaluations WHERE clustering_id = ?", [clustering_id])
        conn.execute("DELETE FROM clusterings WHERE id = ?", [clustering_id])
        conn.execute(
            "INSERT INTO clusterings (id, phase, embed_model, embedding_set_id, params, n_insights, n_clusters,"
            " outlier_rate, stability_ari, stability, code_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                clustering_id,
                row["phase"],
                row["embed_model"],
                row["embedding_set_id"],
                json.dumps(row["params"], sort_keys=True),
                row["n_insights"],
                row["n_clusters"],
                row["outlier_rate"],
                row["stability_ari"],
                json.dumps(row["stability"]) if row["stability"] else None,
                row["code_version"],
            ],
        )
        conn.register("new_assignments", assignments)
        try:
            conn.execute(
                "INSERT INTO cluster_assignments"
                " (clustering_id, insight_id, cluster, reassigned, probability, x, y)"
                " SELECT ?, insight_id, cluster, reassigned, probability, x, y FROM new_assignments",
                [clustering_id],
            )
        finally:
            conn.unregister("new_assignments")


def write_extras(
    store: Store, clustering_id: str, ids: list[str] | None, xy: np.ndarray | None, stability: dict[str, Any] | None
) -> None:
    """Store a clustering's deferred parts in one transaction: the 2-D map of insights `ids` (`xy`, n x 2) and
    its stability scores, each when given."""
    with store.write() as conn:
        if stability is not None:
            conn.execute("UPDATE clusterings SET stability_ari = ?, stability = ? WHERE id = ?",
                         [stability["mean_ari"], json.dumps(stability), clustering_id])
        if xy is not None and ids is not None:
            xy = np.asarray(xy, dtype=np.float64)
            points = pa.table({"insight_id": pa.array(ids), "x": pa.array(xy[:, 0]), "y": pa.array(xy[:, 1])})
            conn.register("new_map", points)
            try:
                conn.execute(
                    "UPDATE cluster_assignments SET x = m.x, y = m.y FROM new_map m"
                    " WHERE cluster_assignments.clustering_id = ? AND cluster_assignments.insight_id = m.insight_id",
                    [clustering_id],
                )
            finally:
                conn.unregister("new_map")


def write_evaluation(store: Store, clustering_id: str, label_column: str, metrics: dict[str, Any]) -> None:
    """Replace the evaluation of a clustering against `label_column`."""
    with store.write() as conn:
        conn.execute(
            "DELETE FROM cluster_evaluations WHERE clustering_id = ? AND label_column = ?",
            [clustering_id, label_column],
        )
        conn.execute(
            "INSERT INTO cluster_evaluations (clustering_id, label_column, metrics) VALUES (?, ?, ?)",
            [clustering_id, label_column, json.dumps(metrics)],
        )


def write_reduction(store: Store, key: str, reducer: str, reduced: np.ndarray) -> None:
    """Keep a reduction under `key` in `cluster_reductions`, dropping all but the MAX_REDUCTIONS newest."""
    reduced = np.ascontiguousarray(reduced, dtype=np.float32)
    with store.write() as conn:
        conn.execute("DELETE FROM cluster_reductions WHERE key = ?", [key])
        conn.execute(
            "INSERT INTO cluster_reductions (key, reducer, n_rows, n_dims, vectors) VALUES (?, ?, ?, ?, ?)",
            [key, reducer, reduced.shape[0], reduced.shape[1], reduced.tobytes()],
        )
        conn.execute(
            "DELETE FROM cluster_reductions WHERE key NOT IN"
            " (SELECT key FROM cluster_reductions ORDER BY used_at DESC, key LIMIT ?)",
            [MAX_REDUCTIONS],
        )

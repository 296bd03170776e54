"""Hidden tests for kmeans.py (mini-kmeans-init and its masked-function variants); run from the repo root."""

import numpy as np

from data import N_CLUSTERS, POINTS_PER_CLUSTER, make_blobs
from kmeans import KMeans, kmeanspp_init, random_init, squared_distances


def _blobs_hit(centres, X, labels):
    nearest_point = squared_distances(centres, X).argmin(axis=1)
    return len(set(labels[nearest_point].tolist()))


def test_random_init_picks_distinct_data_points():
    X, _ = make_blobs(seed=1)
    centres = random_init(X, 8, np.random.RandomState(0))
    assert centres.shape == (8, 2)
    assert squared_distances(centres, X).min(axis=1).max() == 0.0
    assert len({tuple(c) for c in centres.tolist()}) == 8


def test_kmeanspp_picks_data_points_deterministically():
    X, _ = make_blobs(seed=1)
    first = kmeanspp_init(X, 8, np.random.RandomState(3))
    again = kmeanspp_init(X, 8, np.random.RandomState(3))
    assert first.shape == (8, 2)
    np.testing.assert_array_equal(first, again)
    assert squared_distances(first, X).min(axis=1).max() == 0.0


def test_kmeanspp_spreads_centres_over_the_blobs():
    X, labels = make_blobs(seed=2)
    hits = [_blobs_hit(kmeanspp_init(X, N_CLUSTERS, np.random.RandomState(s)), X, labels) for s in range(40)]
    assert np.mean(np.array(hits) == N_CLUSTERS) >= 0.6
    uniform = [_blobs_hit(random_init(X, N_CLUSTERS, np.random.RandomState(s)), X, labels) for s in range(40)]
    assert np.mean(hits) > np.mean(uniform) + 0.5


def test_fit_reaches_a_fixed_point_of_lloyd():
    X, _ = make_blobs(seed=4)
    model = KMeans(N_CLUSTERS, init="random", seed=5)
    assert model.fit(X) is model
    assert model.labels_.shape == (len(X),)
    np.testing.assert_array_equal(model.labels_, squared_distances(X, model.cluster_centers_).argmin(axis=1))
    for j in range(N_CLUSTERS):
        members = X[model.labels_ == j]
        if len(members):
            np.testing.assert_allclose(model.cluster_centers_[j], members.mean(axis=0), atol=1e-9)
    inertia = squared_distances(X, model.cluster_centers_).min(axis=1).sum()
    assert abs(model.inertia_ - inertia) < 1e-6
    assert 1 <= model.n_iter_ <= model.max_iter


def test_fit_from_good_seeds_recovers_the_blobs():
    X, labels = make_blobs(seed=0)
    best = min((KMeans(N_CLUSTERS, seed=s).fit(X) for s in range(10)), key=lambda m: m.inertia_)
    for j in range(N_CLUSTERS):
        assert len(set(best.labels_[labels == j].tolist())) == 1
    sizes = np.bincount(best.labels_, minlength=N_CLUSTERS)
    assert sizes.tolist() == [POINTS_PER_CLUSTER] * N_CLUSTERS


def test_reference_experiment_numbers():
    X, _ = make_blobs(seed=0)
    inertias = {
        init: np.array([KMeans(N_CLUSTERS, init=init, seed=s).fit(X).inertia_ for s in range(30)])
        for init in ("random", "k-means++")
    }
    best = min(v.min() for v in inertias.values())
    assert abs(np.mean(inertias["k-means++"] <= best * 1.01) - 0.7) <= 0.1
    assert abs(np.mean(inertias["random"] <= best * 1.01) - 0.1) <= 0.1
    assert inertias["k-means++"].mean() < inertias["random"].mean() / 2

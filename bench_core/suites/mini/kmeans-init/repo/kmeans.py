"""Lloyd's k-means with two seeding rules: uniform random points and k-means++ (numpy only)."""

import numpy as np


def squared_distances(X, centres):
    """(n_samples, n_centres) matrix of squared Euclidean distances."""
    return ((X[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)


def random_init(X, k: int, rs):
    """k distinct data points chosen uniformly at random with the RandomState `rs`."""
    return X[rs.choice(len(X), size=k, replace=False)].copy()


def kmeanspp_init(X, k: int, rs):
    """k-means++ seeding (Arthur and Vassilvitskii, 2007) with the RandomState `rs`.

    The first centre is a uniformly chosen point (rs.randint); each next centre is a point drawn
    (rs.choice with probabilities p) with probability proportional to its squared distance to the nearest
    centre chosen so far.
    """
    centres = [X[rs.randint(len(X))]]
    closest = squared_distances(X, np.array(centres)).min(axis=1)
    for _ in range(1, k):
        index = rs.choice(len(X), p=closest / closest.sum())
        centres.append(X[index])
        closest = np.minimum(closest, squared_distances(X, X[index][None, :])[:, 0])
    return np.array(centres)


class KMeans:
    """Lloyd iterations from a given seeding rule until assignments stop changing."""

    def __init__(self, n_clusters: int, init: str = "k-means++", max_iter: int = 300, seed: int = 0):
        self.n_clusters = n_clusters
        self.init = init
        self.max_iter = max_iter
        self.seed = seed

    def fit(self, X):
        """Seed with RandomState(seed), then alternate assignment and mean update until labels are stable.

        Sets cluster_centers_, labels_, inertia_ (sum of squared distances to the assigned centre) and
        n_iter_; a cluster that loses all its points keeps its previous centre. Returns self.
        """
        rs = np.random.RandomState(self.seed)
        seed_rule = kmeanspp_init if self.init == "k-means++" else random_init
        centres = seed_rule(X, self.n_clusters, rs)
        labels = None
        n_iter = 0
        while n_iter < self.max_iter:
            n_iter += 1
            new_labels = squared_distances(X, centres).argmin(axis=1)
            if labels is not None and np.array_equal(new_labels, labels):
                break
            labels = new_labels
            for j in range(self.n_clusters):
                members = X[labels == j]
                if len(members):
                    centres[j] = members.mean(axis=0)
        self.cluster_centers_ = centres
        self.labels_ = labels
        self.inertia_ = float(squared_distances(X, centres)[np.arange(len(X)), labels].sum())
        self.n_iter_ = n_iter
        return self

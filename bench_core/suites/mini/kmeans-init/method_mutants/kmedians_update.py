"""k-medians update: each centre moved to the coordinate-wise median of its points, not their mean."""


def fit(self, X):
    import numpy as np

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
                centres[j] = np.median(members, axis=0)
    self.cluster_centers_ = centres
    self.labels_ = labels
    self.inertia_ = float(squared_distances(X, centres)[np.arange(len(X)), labels].sum())
    self.n_iter_ = n_iter
    return self

"""Lloyd's iterations run a fixed 10 times, without checking that the labels are stable."""


def fit(self, X):
    import numpy as np

    rs = np.random.RandomState(self.seed)
    seed_rule = kmeanspp_init if self.init == "k-means++" else random_init
    centres = seed_rule(X, self.n_clusters, rs)
    for _ in range(10):
        labels = squared_distances(X, centres).argmin(axis=1)
        for j in range(self.n_clusters):
            members = X[labels == j]
            if len(members):
                centres[j] = members.mean(axis=0)
    self.cluster_centers_ = centres
    self.labels_ = labels
    self.inertia_ = float(squared_distances(X, centres)[np.arange(len(X)), labels].sum())
    self.n_iter_ = 10
    return self

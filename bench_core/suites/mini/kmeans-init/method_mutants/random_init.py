"""Uniform random seeding in place of k-means++: k distinct data points drawn uniformly."""


def kmeanspp_init(X, k, rs):
    return X[rs.choice(len(X), size=k, replace=False)].copy()

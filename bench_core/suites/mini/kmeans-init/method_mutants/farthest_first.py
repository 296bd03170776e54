"""Farthest-first traversal: a random first centre, then always the point farthest from the chosen ones (greedy,
not sampled in proportion to D(x)^2)."""


def kmeanspp_init(X, k, rs):
    import numpy as np

    centres = [X[rs.randint(len(X))]]
    closest = ((X - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        index = int(np.argmax(closest))
        centres.append(X[index])
        closest = np.minimum(closest, ((X - X[index]) ** 2).sum(axis=1))
    return np.array(centres)

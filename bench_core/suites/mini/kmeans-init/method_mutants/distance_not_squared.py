"""D-sampling: each next centre drawn in proportion to the distance D(x), not its square."""


def kmeanspp_init(X, k, rs):
    import numpy as np

    centres = [X[rs.randint(len(X))]]
    closest = np.sqrt(((X - centres[0]) ** 2).sum(axis=1))
    for _ in range(1, k):
        index = rs.choice(len(X), p=closest / closest.sum())
        centres.append(X[index])
        closest = np.minimum(closest, np.sqrt(((X - X[index]) ** 2).sum(axis=1)))
    return np.array(centres)

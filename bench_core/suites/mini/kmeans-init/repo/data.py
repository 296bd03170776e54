"""Well-separated 2-D Gaussian blobs with known centres."""

import numpy as np

N_CLUSTERS = 8
POINTS_PER_CLUSTER = 50
CLUSTER_SD = 0.5


def make_blobs(seed: int = 0):
    """Return (X, labels): N_CLUSTERS blobs on a 4 x 2 grid with spacing 6, CLUSTER_SD spread each."""
    rs = np.random.RandomState(seed)
    centres = np.array([[6.0 * (i % 4), 6.0 * (i // 4)] for i in range(N_CLUSTERS)])
    X = np.vstack([c + rs.normal(scale=CLUSTER_SD, size=(POINTS_PER_CLUSTER, 2)) for c in centres])
    labels = np.repeat(np.arange(N_CLUSTERS), POINTS_PER_CLUSTER)
    return X, labels

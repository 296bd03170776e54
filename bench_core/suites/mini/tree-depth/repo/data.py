"""A two-feature classification task with a curved boundary and 20% of labels flipped at random."""

import numpy as np

N_TRAIN = 500
N_TEST = 2000
LABEL_NOISE = 0.2


def make_data(seed: int = 0):
    """Return (X_train, y_train, X_test, y_test); test labels are as noisy as training labels."""
    rs = np.random.RandomState(seed)
    n = N_TRAIN + N_TEST
    X = rs.uniform(-3.0, 3.0, size=(n, 2))
    clean = (X[:, 1] > np.sin(1.5 * X[:, 0])).astype(int)
    flip = rs.uniform(size=n) < LABEL_NOISE
    y = np.where(flip, 1 - clean, clean)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]

"""An imbalanced binary task: about 5% positives, shifted by 1.2 on the first two of five features."""

import numpy as np

N_SAMPLES = 4000
N_TRAIN = 2000
POSITIVE_RATE = 0.05


def make_data(seed: int = 0):
    """Return (X_train, y_train, X_test, y_test); the same seed always gives the same arrays."""
    rs = np.random.RandomState(seed)
    y = (rs.uniform(size=N_SAMPLES) < POSITIVE_RATE).astype(int)
    X = rs.normal(size=(N_SAMPLES, 5))
    X[y == 1, :2] += 1.2
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]

"""A linear regression problem with nearly as many features as training samples."""

import numpy as np

N_TRAIN = 60
N_TEST = 2000
N_FEATURES = 50
NOISE_SD = 1.0


def make_data(seed: int = 0):
    """Return (X_train, y_train, X_test, y_test) drawn from y = X w + noise with fixed, seeded draws."""
    rs = np.random.RandomState(seed)
    weights = rs.normal(scale=0.5, size=N_FEATURES)
    X = rs.normal(size=(N_TRAIN + N_TEST, N_FEATURES))
    y = X @ weights + 3.0 + rs.normal(scale=NOISE_SD, size=N_TRAIN + N_TEST)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]

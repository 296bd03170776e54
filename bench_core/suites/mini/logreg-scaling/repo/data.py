"""Synthetic binary classification data whose informative features live on a tiny scale.

Four informative features drive the label through a logistic model; six nuisance features are pure noise.
The informative features are multiplied by 1e-3 and the nuisance ones by 1e2, so the design matrix is
badly conditioned (column scales differ by five orders of magnitude).
"""

import numpy as np

N_SAMPLES = 3000
N_TRAIN = 1500
INFORMATIVE_SCALE = 1e-3
NUISANCE_SCALE = 1e2
TRUE_WEIGHTS = np.array([1.5, -2.0, 1.0, 0.8])
N_NUISANCE = 6


def make_data(seed: int = 0):
    """Return (X_train, y_train, X_test, y_test); the same seed always gives the same arrays."""
    rs = np.random.RandomState(seed)
    latent = rs.normal(size=(N_SAMPLES, TRUE_WEIGHTS.size))
    probability = 1.0 / (1.0 + np.exp(-(latent @ TRUE_WEIGHTS)))
    y = (rs.uniform(size=N_SAMPLES) < probability).astype(int)
    nuisance = rs.normal(size=(N_SAMPLES, N_NUISANCE))
    X = np.hstack([latent * INFORMATIVE_SCALE, nuisance * NUISANCE_SCALE])
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]

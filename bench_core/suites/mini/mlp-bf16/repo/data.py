"""A fixed synthetic 3-class task: 20 features, labels from a random two-layer teacher network."""

import numpy as np

N_TRAIN = 4000
N_TEST = 4000
N_FEATURES = 20
N_CLASSES = 3
TEACHER_HIDDEN = 4


def make_data(seed: int = 0):
    """Return float32/int64 numpy arrays (X_train, y_train, X_test, y_test); labels are noise-free."""
    rs = np.random.RandomState(seed)
    X = rs.normal(size=(N_TRAIN + N_TEST, N_FEATURES)).astype(np.float32)
    hidden = np.tanh(X @ rs.normal(scale=1.0, size=(N_FEATURES, TEACHER_HIDDEN)))
    y = (hidden @ rs.normal(size=(TEACHER_HIDDEN, N_CLASSES))).argmax(axis=1).astype(np.int64)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]

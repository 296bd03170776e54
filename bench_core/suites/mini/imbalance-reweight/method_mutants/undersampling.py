"""Random undersampling: as many negatives kept as there are positives."""


def fit_reweighted(X, y):
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    X, y = np.asarray(X), np.asarray(y)
    rs = np.random.RandomState(0)
    positives = np.flatnonzero(y == 1)
    negatives = rs.choice(np.flatnonzero(y == 0), size=len(positives), replace=False)
    rows = np.concatenate([negatives, positives])
    return LogisticRegression(C=1.0, max_iter=1000).fit(X[rows], y[rows])

"""Random oversampling: positives drawn with replacement until both classes have as many samples."""


def fit_reweighted(X, y):
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    X, y = np.asarray(X), np.asarray(y)
    rs = np.random.RandomState(0)
    positives, negatives = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    extra = rs.choice(positives, size=len(negatives) - len(positives), replace=True)
    rows = np.concatenate([negatives, positives, extra])
    return LogisticRegression(C=1.0, max_iter=1000).fit(X[rows], y[rows])

"""No weighting at all: the unweighted model."""


def fit_reweighted(X, y):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, max_iter=1000).fit(X, y)

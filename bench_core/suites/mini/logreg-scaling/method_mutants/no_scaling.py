"""No standardisation: the classifier alone whatever `standardize` says."""


def build_model(standardize):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, solver="lbfgs", max_iter=10000)

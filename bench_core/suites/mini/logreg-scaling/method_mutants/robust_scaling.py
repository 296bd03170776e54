"""Robust scaling (median and interquartile range) in place of standardisation."""


def build_model(standardize):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import RobustScaler

    classifier = LogisticRegression(C=1.0, solver="lbfgs", max_iter=10000)
    return make_pipeline(RobustScaler(), classifier) if standardize else classifier

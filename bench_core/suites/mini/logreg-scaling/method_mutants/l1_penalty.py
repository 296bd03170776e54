"""An L1 penalty (liblinear) in place of L2."""


def build_model(standardize):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classifier = LogisticRegression(C=1.0, penalty="l1", solver="liblinear", max_iter=10000)
    return make_pipeline(StandardScaler(), classifier) if standardize else classifier

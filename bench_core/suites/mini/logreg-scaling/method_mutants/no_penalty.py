"""No penalty: logistic regression with C so large that L2 does nothing."""


def build_model(standardize):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classifier = LogisticRegression(C=1e12, solver="lbfgs", max_iter=10000)
    return make_pipeline(StandardScaler(), classifier) if standardize else classifier

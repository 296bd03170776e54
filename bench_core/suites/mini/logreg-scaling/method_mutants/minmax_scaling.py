"""Min-max scaling to [0, 1] in place of standardisation."""


def build_model(standardize):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    classifier = LogisticRegression(C=1.0, solver="lbfgs", max_iter=10000)
    return make_pipeline(MinMaxScaler(), classifier) if standardize else classifier

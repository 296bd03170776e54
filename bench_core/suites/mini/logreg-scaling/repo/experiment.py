"""Train L2-regularised logistic regression with and without feature standardisation."""

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

C = 1.0
MAX_ITER = 10000


def build_model(standardize: bool):
    """An unfitted classifier: L2 logistic regression (C=1), preceded by a StandardScaler if `standardize`."""
    classifier = LogisticRegression(C=C, solver="lbfgs", max_iter=MAX_ITER)
    if standardize:
        return make_pipeline(StandardScaler(), classifier)
    return classifier


def fit_and_score(X_train, y_train, X_test, y_test, standardize: bool) -> float:
    """Fit on the training split only and return accuracy on the test split."""
    model = build_model(standardize)
    model.fit(X_train, y_train)
    return float(np.mean(model.predict(X_test) == y_test))


def run_experiment(X_train, y_train, X_test, y_test) -> dict:
    """Accuracy of both variants and of always predicting the training majority class, rounded to 4 digits."""
    majority = int(np.mean(y_train) >= 0.5)
    return {
        "accuracy_raw": round(fit_and_score(X_train, y_train, X_test, y_test, standardize=False), 4),
        "accuracy_standardized": round(fit_and_score(X_train, y_train, X_test, y_test, standardize=True), 4),
        "accuracy_majority": round(float(np.mean(y_test == majority)), 4),
    }

"""Logistic regression on the imbalanced task and the metrics used to judge it."""

import numpy as np
from sklearn.linear_model import LogisticRegression

C = 1.0


def balanced_accuracy(y_true, y_pred) -> float:
    """Mean of the recall of each class present in y_true."""
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    recalls = [np.mean(y_pred[y_true == label] == label) for label in np.unique(y_true)]
    return float(np.mean(recalls))


def fit_unweighted(X, y):
    """L2 logistic regression (C=1) where every training sample counts the same."""
    return LogisticRegression(C=C, max_iter=1000).fit(X, y)

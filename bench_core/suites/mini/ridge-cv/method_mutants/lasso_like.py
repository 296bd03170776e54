"""Another penalty: coefficients of least squares soft-thresholded by alpha / n (an L1 shrinkage, not L2)."""


def fit(self, X, y):
    import numpy as np

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    x_mean, y_mean = X.mean(axis=0), y.mean()
    ols = np.linalg.lstsq(X - x_mean, y - y_mean, rcond=None)[0]
    self.coef_ = np.sign(ols) * np.maximum(np.abs(ols) - self.alpha / len(X), 0.0)
    self.intercept_ = float(y_mean - x_mean @ self.coef_)
    return self

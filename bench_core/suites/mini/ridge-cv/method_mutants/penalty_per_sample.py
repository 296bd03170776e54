"""The penalty scaled by the number of samples, (Xc'Xc + n alpha I), as in glmnet's mean-loss objective."""


def fit(self, X, y):
    import numpy as np

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc = X - x_mean
    gram = Xc.T @ Xc + len(X) * self.alpha * np.eye(X.shape[1])
    self.coef_ = np.linalg.solve(gram, Xc.T @ (y - y_mean))
    self.intercept_ = float(y_mean - x_mean @ self.coef_)
    return self

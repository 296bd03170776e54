"""Ridge regression in closed form, k-fold splits and penalty selection by cross-validation (numpy only)."""

import numpy as np


class RidgeRegression:
    """Least squares with an L2 penalty `alpha` on the coefficients; the intercept is not penalised."""

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def fit(self, X, y):
        """Solve (Xc'Xc + alpha I) w = Xc'yc on centred data; set coef_ and intercept_; return self."""
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        x_mean = X.mean(axis=0)
        y_mean = y.mean()
        Xc = X - x_mean
        gram = Xc.T @ Xc + self.alpha * np.eye(X.shape[1])
        self.coef_ = np.linalg.solve(gram, Xc.T @ (y - y_mean))
        self.intercept_ = float(y_mean - x_mean @ self.coef_)
        return self

    def predict(self, X):
        """Predictions of the fitted model."""
        return np.asarray(X, dtype=float) @ self.coef_ + self.intercept_


def mean_squared_error(y_true, y_pred) -> float:
    return float(np.mean((np.asarray(y_true) - np.asarray(y_pred)) ** 2))


def kfold_indices(n_samples: int, n_folds: int, seed: int):
    """Shuffle range(n_samples) with RandomState(seed) and cut it into n_folds contiguous folds.

    Returns a list of (train_idx, val_idx) pairs; the first n_samples % n_folds folds get one extra sample,
    and every sample is in exactly one validation fold.
    """
    order = np.random.RandomState(seed).permutation(n_samples)
    sizes = np.full(n_folds, n_samples // n_folds)
    sizes[: n_samples % n_folds] += 1
    folds = []
    start = 0
    for size in sizes:
        val_idx = order[start:start + size]
        train_idx = np.concatenate([order[:start], order[start + size:]])
        folds.append((train_idx, val_idx))
        start += size
    return folds


def cross_validate_alpha(X, y, alphas, n_folds: int = 5, seed: int = 0):
    """Mean validation MSE of RidgeRegression for each alpha over the same k folds.

    Returns (best_alpha, mean_mse) where mean_mse[i] belongs to alphas[i]; ties go to the first alpha.
    """
    folds = kfold_indices(len(y), n_folds, seed)
    mean_mse = np.zeros(len(alphas))
    for i, alpha in enumerate(alphas):
        errors = []
        for train_idx, val_idx in folds:
            model = RidgeRegression(alpha).fit(X[train_idx], y[train_idx])
            errors.append(mean_squared_error(y[val_idx], model.predict(X[val_idx])))
        mean_mse[i] = np.mean(errors)
    return float(alphas[int(np.argmin(mean_mse))]), mean_mse

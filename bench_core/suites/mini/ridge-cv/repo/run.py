"""Compare ordinary least squares with ridge regression whose penalty is chosen by 5-fold CV."""

import json

import numpy as np

from data import make_data
from ridge import RidgeRegression, cross_validate_alpha, mean_squared_error

ALPHAS = np.logspace(-3, 3, 13)


def main() -> None:
    X_train, y_train, X_test, y_test = make_data(seed=0)
    ols = RidgeRegression(alpha=0.0).fit(X_train, y_train)
    best_alpha, _ = cross_validate_alpha(X_train, y_train, ALPHAS, n_folds=5, seed=0)
    ridge = RidgeRegression(alpha=best_alpha).fit(X_train, y_train)
    results = {
        "test_mse_ols": round(mean_squared_error(y_test, ols.predict(X_test)), 4),
        "test_mse_ridge_cv": round(mean_squared_error(y_test, ridge.predict(X_test)), 4),
        "selected_alpha": best_alpha,
    }
    with open("results.json", "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()

"""Hidden tests for ridge.py (mini-ridge-cv and its masked-function variants); run from the repo root."""

import numpy as np

from data import make_data
from ridge import RidgeRegression, cross_validate_alpha, kfold_indices, mean_squared_error

ALPHAS = np.logspace(-3, 3, 13)


def _reference_ridge(X, y, alpha):
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc = X - x_mean
    coef = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ (y - y_mean))
    return coef, y_mean - x_mean @ coef


def test_fit_without_penalty_is_least_squares():
    X, y, _, _ = make_data(seed=1)
    model = RidgeRegression(alpha=0.0).fit(X, y)
    design = np.hstack([X, np.ones((len(X), 1))])
    solution = np.linalg.lstsq(design, y, rcond=None)[0]
    np.testing.assert_allclose(model.coef_, solution[:-1], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(model.intercept_, solution[-1], rtol=1e-6, atol=1e-8)


def test_fit_solves_the_penalised_normal_equations():
    X, y, X_test, _ = make_data(seed=2)
    model = RidgeRegression(alpha=3.0).fit(X, y)
    coef, intercept = _reference_ridge(X, y, 3.0)
    assert model.fit(X, y) is model
    np.testing.assert_allclose(model.coef_, coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.predict(X_test), X_test @ coef + intercept, rtol=1e-8, atol=1e-8)


def test_intercept_is_not_penalised():
    X, y, _, _ = make_data(seed=3)
    model = RidgeRegression(alpha=1e9).fit(X, y)
    assert np.abs(model.coef_).max() < 1e-5
    assert abs(model.intercept_ - y.mean()) < 1e-3


def test_kfold_partitions_the_samples():
    folds = kfold_indices(23, 5, seed=4)
    assert len(folds) == 5
    assert [len(val) for _, val in folds] == [5, 5, 5, 4, 4]
    validation = np.concatenate([val for _, val in folds])
    assert sorted(validation.tolist()) == list(range(23))
    for train, val in folds:
        assert set(train.tolist()).isdisjoint(val.tolist())
        assert len(train) + len(val) == 23
    np.testing.assert_array_equal(validation, np.random.RandomState(4).permutation(23))


def test_kfold_depends_only_on_the_seed():
    first = [val.tolist() for _, val in kfold_indices(30, 3, seed=7)]
    again = [val.tolist() for _, val in kfold_indices(30, 3, seed=7)]
    other = [val.tolist() for _, val in kfold_indices(30, 3, seed=8)]
    assert first == again and first != other


def test_cross_validate_alpha_averages_fold_errors():
    X, y, _, _ = make_data(seed=5)
    alphas = np.array([0.1, 10.0])
    best, mean_mse = cross_validate_alpha(X, y, alphas, n_folds=4, seed=6)
    expected = []
    for alpha in alphas:
        errors = []
        for train, val in kfold_indices(len(y), 4, 6):
            coef, intercept = _reference_ridge(X[train], y[train], alpha)
            errors.append(np.mean((y[val] - X[val] @ coef - intercept) ** 2))
        expected.append(np.mean(errors))
    np.testing.assert_allclose(mean_mse, expected, rtol=1e-8)
    assert best == alphas[int(np.argmin(expected))]


def test_reference_experiment_numbers():
    X, y, X_test, y_test = make_data(seed=0)
    best, _ = cross_validate_alpha(X, y, ALPHAS, n_folds=5, seed=0)
    assert best == 10.0
    ols = mean_squared_error(y_test, RidgeRegression(0.0).fit(X, y).predict(X_test))
    ridge = mean_squared_error(y_test, RidgeRegression(best).fit(X, y).predict(X_test))
    assert abs(ols - 10.1878) < 0.01 and abs(ridge - 3.6953) < 0.01

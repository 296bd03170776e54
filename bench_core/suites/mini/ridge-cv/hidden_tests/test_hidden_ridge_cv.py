"""Hidden tests for ridge.py (mini-ridge-cv and its masked-function variants).

They run in the judge process, which never imports the agent's code: data comes from the task's own data.py (the
pristine repository), the agent's functions run in the sandbox through the `agent` fixture, and every expected
value is computed here.
"""

import numpy as np

from data import make_data

ALPHAS = np.logspace(-3, 3, 13)


def _reference_ridge(X, y, alpha):
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc = X - x_mean
    coef = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ (y - y_mean))
    return coef, y_mean - x_mean @ coef


def _reference_folds(n_samples, n_folds, seed):
    order = np.random.RandomState(seed).permutation(n_samples)
    sizes = [n_samples // n_folds + (1 if i < n_samples % n_folds else 0) for i in range(n_folds)]
    bounds = np.cumsum([0, *sizes])
    return [order[bounds[i]:bounds[i + 1]] for i in range(n_folds)]


FIT = """
from ridge import RidgeRegression
model = RidgeRegression(alpha=alpha)
returned = model.fit(X, y)
result = {"same": returned is model, "coef": np.asarray(model.coef_, dtype=float),
          "intercept": float(model.intercept_), "predict": np.asarray(model.predict(X_test), dtype=float)}
"""


def _fit(agent, X, y, alpha, X_test):
    return agent.run("import numpy as np\n" + FIT, X=X, y=y, alpha=alpha, X_test=X_test)


def test_fit_without_penalty_is_least_squares(agent):
    X, y, _, _ = make_data(seed=1)
    got = _fit(agent, X, y, 0.0, X[:5])
    design = np.hstack([X, np.ones((len(X), 1))])
    solution = np.linalg.lstsq(design, y, rcond=None)[0]
    np.testing.assert_allclose(got["coef"], solution[:-1], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got["intercept"], solution[-1], rtol=1e-6, atol=1e-8)


def test_fit_solves_the_penalised_normal_equations(agent):
    X, y, X_test, _ = make_data(seed=2)
    got = _fit(agent, X, y, 3.0, X_test)
    coef, intercept = _reference_ridge(X, y, 3.0)
    assert got["same"] is True
    np.testing.assert_allclose(got["coef"], coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got["predict"], X_test @ coef + intercept, rtol=1e-8, atol=1e-8)


def test_intercept_is_not_penalised(agent):
    X, y, _, _ = make_data(seed=3)
    got = _fit(agent, X, y, 1e9, X[:2])
    coef, intercept = _reference_ridge(X, y, 1e9)
    # tiny but not zero: coefficients set to zero are no ridge fit (relative, so zeros cannot pass)
    np.testing.assert_allclose(got["coef"], coef, rtol=1e-4, atol=0)
    assert abs(got["intercept"] - y.mean()) < 1e-3
    np.testing.assert_allclose(got["intercept"], intercept, rtol=1e-8)


FOLDS = """
from ridge import kfold_indices
result = [[np.asarray(train), np.asarray(val)] for train, val in kfold_indices(n, k, seed=seed)]
"""


def _folds(agent, n, k, seed):
    return agent.run("import numpy as np\n" + FOLDS, n=n, k=k, seed=seed)


def test_kfold_partitions_the_samples(agent):
    folds = _folds(agent, 23, 5, 4)
    assert len(folds) == 5
    assert [len(val) for _, val in folds] == [5, 5, 5, 4, 4]
    validation = np.concatenate([val for _, val in folds])
    assert sorted(validation.tolist()) == list(range(23))
    for train, val in folds:
        assert set(train.tolist()).isdisjoint(val.tolist())
        assert len(train) + len(val) == 23
    np.testing.assert_array_equal(validation, np.random.RandomState(4).permutation(23))


def test_kfold_depends_only_on_the_seed(agent):
    first = [val.tolist() for _, val in _folds(agent, 30, 3, 7)]
    again = [val.tolist() for _, val in _folds(agent, 30, 3, 7)]
    other = [val.tolist() for _, val in _folds(agent, 30, 3, 8)]
    assert first == again and first != other
    assert first == [v.tolist() for v in _reference_folds(30, 3, 7)]


def test_cross_validate_alpha_averages_fold_errors(agent):
    X, y, _, _ = make_data(seed=5)
    alphas = np.array([0.1, 10.0])
    best, mean_mse = agent.call("ridge:cross_validate_alpha", X, y, alphas, n_folds=4, seed=6)
    expected = []
    for alpha in alphas:
        errors = []
        for val in _reference_folds(len(y), 4, 6):
            train = np.setdiff1d(np.arange(len(y)), val)
            coef, intercept = _reference_ridge(X[train], y[train], alpha)
            errors.append(np.mean((y[val] - X[val] @ coef - intercept) ** 2))
        expected.append(np.mean(errors))
    np.testing.assert_allclose(np.asarray(mean_mse, dtype=float), expected, rtol=1e-8)
    assert best == alphas[int(np.argmin(expected))]


EXPERIMENT = """
from ridge import RidgeRegression, cross_validate_alpha, mean_squared_error
best, _ = cross_validate_alpha(X, y, alphas, n_folds=5, seed=0)
result = {"best": float(best),
          "ols": np.asarray(RidgeRegression(0.0).fit(X, y).predict(X_test), dtype=float),
          "ridge": np.asarray(RidgeRegression(best).fit(X, y).predict(X_test), dtype=float)}
"""


def test_reference_experiment_numbers(agent):
    X, y, X_test, y_test = make_data(seed=0)
    got = agent.run("import numpy as np\n" + EXPERIMENT, X=X, y=y, X_test=X_test, alphas=ALPHAS)
    assert got["best"] == 10.0
    ols = float(np.mean((y_test - got["ols"]) ** 2))
    ridge = float(np.mean((y_test - got["ridge"]) ** 2))
    assert abs(ols - 10.1878) < 0.01 and abs(ridge - 3.6953) < 0.01
    coef, intercept = _reference_ridge(X, y, 10.0)
    np.testing.assert_allclose(got["ridge"], X_test @ coef + intercept, rtol=1e-6, atol=1e-6)

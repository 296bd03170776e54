"""Hidden tests for experiment.py (mini-logreg-scaling); run from the repository root."""

import numpy as np

from data import make_data
from experiment import build_model, fit_and_score, run_experiment


def test_build_model_is_unfitted_and_predicts_after_fit():
    X_train, y_train, X_test, _ = make_data(seed=3)
    for standardize in (False, True):
        model = build_model(standardize)
        assert not hasattr(model, "classes_")
        assert model.fit(X_train, y_train).predict(X_test).shape == (len(X_test),)


def test_standardised_model_ignores_column_scale():
    X_train, y_train, X_test, y_test = make_data(seed=1)
    scales = np.array([1e3] * 4 + [1e-2] * 6)
    original = fit_and_score(X_train, y_train, X_test, y_test, standardize=True)
    rescaled = fit_and_score(X_train * scales, y_train, X_test * scales, y_test, standardize=True)
    assert abs(original - rescaled) <= 0.002


def test_raw_model_depends_on_column_scale():
    X_train, y_train, X_test, y_test = make_data(seed=1)
    scales = np.array([1e3] * 4 + [1e-2] * 6)
    raw = fit_and_score(X_train, y_train, X_test, y_test, standardize=False)
    rescaled = fit_and_score(X_train * scales, y_train, X_test * scales, y_test, standardize=False)
    assert rescaled - raw > 0.2


def test_scaler_is_fitted_on_the_training_split_only():
    X_train, y_train, X_test, y_test = make_data(seed=2)
    shifted = X_test + np.array([0.0] * 4 + [1e4] * 6)
    # A scaler refitted on the test split would undo the shift; one fitted on training data does not.
    assert fit_and_score(X_train, y_train, shifted, y_test, standardize=True) < 0.7


def test_run_experiment_reproduces_the_reference():
    results = run_experiment(*make_data(seed=0))
    assert set(results) == {"accuracy_raw", "accuracy_standardized", "accuracy_majority"}
    assert abs(results["accuracy_raw"] - 0.4827) <= 0.01
    assert abs(results["accuracy_standardized"] - 0.818) <= 0.01
    assert abs(results["accuracy_majority"] - 0.5027) <= 0.0001

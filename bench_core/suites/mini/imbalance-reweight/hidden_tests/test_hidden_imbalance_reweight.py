"""Hidden tests for the extension of mini-imbalance-reweight.

The judge process never imports the agent's code: data comes from the task's own data.py (the pristine
repository), the agent's functions run in the sandbox through the `agent` fixture, and the metrics are computed
here from the predictions the agent's models make.
"""

import numpy as np

from data import make_data


def _balanced_accuracy(y_true, y_pred):
    return float(np.mean([np.mean(y_pred[y_true == label] == label) for label in np.unique(y_true)]))


def _weights(agent, y):
    return np.asarray(agent.call("model:inverse_frequency_weights", y), dtype=float)


def test_weights_give_each_class_equal_total_weight(agent):
    y = np.array([0] * 90 + [1] * 10)
    weights = _weights(agent, y)
    assert weights.shape == (100,)
    np.testing.assert_allclose(weights[y == 0], 100 / (2 * 90))
    np.testing.assert_allclose(weights[y == 1], 100 / (2 * 10))
    assert abs(weights[y == 0].sum() - weights[y == 1].sum()) < 1e-9


def test_weights_with_three_classes(agent):
    weights = _weights(agent, np.array([2, 2, 0, 1, 1, 1]))
    np.testing.assert_allclose(weights, [1.0, 1.0, 2.0, 2 / 3, 2 / 3, 2 / 3])


PREDICT = """
import numpy as np
from model import fit_reweighted, fit_unweighted
result = {"base": np.asarray(fit_unweighted(X_train, y_train).predict(X_test)),
          "reweighted": np.asarray(fit_reweighted(X_train, y_train).predict(X_test))}
"""


def test_reweighting_raises_balanced_accuracy(agent):
    X_train, y_train, X_test, y_test = make_data(seed=1)
    got = agent.run(PREDICT, X_train=X_train, y_train=y_train, X_test=X_test)
    assert got["base"].shape == got["reweighted"].shape == y_test.shape
    base = _balanced_accuracy(y_test, got["base"])
    reweighted = _balanced_accuracy(y_test, got["reweighted"])
    assert reweighted > base + 0.1


RUN = """
import json, subprocess, sys
subprocess.run([sys.executable, "run.py"], check=True, capture_output=True)
with open("results.json") as handle:
    result = json.load(handle)
"""


def test_run_reports_base_and_extension_metrics(agent):
    results = agent.run(RUN)
    assert abs(results["balanced_accuracy_unweighted"] - 0.5805) <= 0.005
    assert abs(results["balanced_accuracy_reweighted"] - 0.7776) <= 0.003
    assert abs(results["accuracy_reweighted"] - 0.809) <= 0.0015


SAME_FIT = """
import numpy as np
from sklearn.linear_model import LogisticRegression
from model import fit_reweighted
counts = np.bincount(y_train)
weights = (len(y_train) / (len(counts) * counts))[y_train]
reference = LogisticRegression(C=1.0, max_iter=1000).fit(X_train, y_train, sample_weight=weights)
result = {"agent": np.asarray(fit_reweighted(X_train, y_train).predict(X_test)),
          "reference": np.asarray(reference.predict(X_test))}
"""


def test_reweighted_model_is_the_weighted_fit(agent):
    # what the method is, not only where its accuracy lands: threshold moving, resampling, undersampling or weights
    # normalised to sum to one reach a balanced accuracy near the weighted fit's, but disagree with its predictions
    # on 0.5% to 5% of test points; implementations of the weighting itself (sample weights, class_weight="balanced",
    # the neg/pos ratio on positives) agree on every point
    for seed in (1, 2, 3):
        X_train, y_train, X_test, _ = make_data(seed=seed)
        got = agent.run(SAME_FIT, X_train=X_train, y_train=y_train, X_test=X_test)
        assert got["agent"].shape == got["reference"].shape
        assert float(np.mean(got["agent"] == got["reference"])) >= 0.998

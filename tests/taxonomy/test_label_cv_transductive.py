"""The transductive variants that benchmarks/trail_label_cv.py measured for the label model (issue 41, third pass):
label spreading follows the graph of unlabelled statements, the k-NN vote follows the nearest labelled rows, the
prior shift moves a near tie toward the frequent class, and the normaliser folds ids and numbers. docs/quality.md
reports what each did on TRAIL GAIA; these check that each does what it is named for."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import trail_label_cv as cv  # noqa: E402


def _two_groups() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training rows: three near (1, 0) labelled A, three near (0, 1) labelled B; a chain of unlabelled statements
    that walks from the A group toward the B group."""
    rng = np.random.default_rng(0)
    train = np.vstack([[1, 0] + 0.01 * rng.standard_normal((3, 2)), [0, 1] + 0.01 * rng.standard_normal((3, 2))])
    onehot = np.repeat(np.eye(2), 3, axis=0)
    chain = np.array([[np.cos(a), np.sin(a)] for a in np.linspace(0.1, 0.6, 6)])
    return train, onehot, chain


def test_label_spreading_follows_the_graph_against_a_weak_prior():
    train, onehot, chain = _two_groups()
    prior = np.tile([0.45, 0.55], (len(chain), 1))  # the regression leans to B for every statement of the chain
    kept = cv.spread_labels(train, onehot, chain, prior, alpha=0.0, k=3)
    assert np.allclose(kept, prior)  # alpha 0: the regression's scores unchanged
    spread = cv.spread_labels(train, onehot, chain, prior, alpha=0.9, k=3)
    assert spread[0].argmax() == 0  # next to the A rows, the graph outweighs the weak prior


def test_knn_vote_and_prior_shift_move_predictions_as_named():
    texts = ["alpha one", "alpha two", "alpha three", "beta one"]
    labels = ["A", "A", "A", "B"]
    x = np.array([[1.0, 0.0], [0.9, 0.1], [0.95, 0.05], [0.0, 1.0]])
    src = np.array(["examples"] * 4)
    z, ztexts = np.array([[0.1, 0.9]]), ["gamma"]  # no word in common; its vector is next to B's row
    args = (x, texts, labels, src, z, ztexts)
    assert list(cv.fit_predict(*args)) == ["A"]  # the regression alone: three A rows outweigh one B row
    assert list(cv.fit_predict(*args, knn=(1, 1.0))) == ["B"]  # the vote alone: its nearest labelled row
    near_b = (x, texts, labels, src, np.zeros((1, 2)), ["beta"])  # B's word, no vector cue; balanced classes
    assert list(cv.fit_predict(*near_b, cw="balanced")) == ["B"]
    assert list(cv.fit_predict(*near_b, cw="balanced", prior=5.0)) == ["A"]  # a strong prior: the frequent class


def test_normalise_folds_ids_and_numbers():
    assert cv.normalise("Span 9f3a1c2b7d OK") == cv.normalise("span 0a4b5c6d7e ok")
    assert cv.normalise("called 4 times, step 12.5") == cv.normalise("called 7 times, step 3")
    assert cv.normalise("page_down tool") == "page_down tool"

"""How far a label spreads (issue 53): a stored label's category takes a statement it was not given on only when
the statement is nearer the category's labelled statements than to any other category it could be in (the other
labels' categories and the types it sits in without labels) by a calibrated margin.

The margin is calibrated on the statements themselves: for every statement of the phase and kind, how much nearer
it is to its nearest category (the types as built without labels, and the labelled categories) than to its second
nearest; the median of those gaps. A label takes a statement only when the statement chooses the label's examples
over everything else as decisively as a typical statement chooses at all: a crash in another file that is merely
nearer one label than the other stays where it was.
"""

from __future__ import annotations

import numpy as np


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def label_prototypes(vectors: np.ndarray, labels: list[str], classes: list[str]) -> np.ndarray:
    """The unit mean of each class's labelled statements, in the order of `classes`."""
    unit, labels_ = _unit(vectors), np.asarray(labels)
    return _unit(np.stack([unit[labels_ == c].mean(axis=0) for c in classes]))


def calibrated_margin(vectors: np.ndarray, categories: np.ndarray) -> float:
    """The median, over the statements of the phase and kind (`vectors`), of how much nearer each is to its
    nearest category than to its second nearest (`categories`: the centroids of the types as built without labels
    and the labelled categories' prototypes): how decisively a typical statement chooses. 0.0 with fewer than two
    categories (nothing to choose between)."""
    if len(categories) < 2 or not len(vectors):
        return 0.0
    sims = np.sort(_unit(vectors) @ _unit(categories).T, axis=1)
    return max(float(np.median(sims[:, -1] - sims[:, -2])), 0.0)


def margins(vectors: np.ndarray, prototypes: np.ndarray, best: np.ndarray, contrast: np.ndarray) -> np.ndarray:
    """Per statement: its cosine to its predicted category's prototype (`prototypes[best]`) minus its largest
    cosine to any other category: the other prototypes and the `contrast` centroids (the types it could stay
    in)."""
    unit = _unit(vectors)
    sims = unit @ prototypes.T
    own = sims[np.arange(len(unit)), best]
    sims[np.arange(len(unit)), best] = -np.inf
    other = sims.max(axis=1) if sims.shape[1] > 1 else np.full(len(unit), -np.inf)
    if len(contrast):
        other = np.maximum(other, (unit @ _unit(contrast).T).max(axis=1))
    return own - other

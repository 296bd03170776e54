"""Name fidelity: items go to the nearest name; the share that lands in its own group."""

from __future__ import annotations

import numpy as np
import pytest

from failatlas.cluster.metrics import name_fidelity


def test_name_fidelity_counts_items_whose_nearest_name_is_their_own_group():
    names = np.eye(3)
    vectors = np.array([[1, 0.1, 0], [0.9, 0, 0.2], [0, 1, 0], [0.1, 0.2, 1], [1, 0, 0.1]], dtype=float)
    assigned = np.array([0, 0, 1, 2, 2])  # the last item sits in group 2 but reads like name 0
    out = name_fidelity(vectors, assigned, names)
    assert out["fidelity"] == pytest.approx(4 / 5) and out["n_items"] == 5
    assert out["per_group"] == {0: 1.0, 1: 1.0, 2: 0.5}
    # items in no group are left out, not counted as misses
    out = name_fidelity(vectors, np.array([0, 0, 1, 2, -1]), names)
    assert out["fidelity"] == 1.0 and out["n_items"] == 4
    # scale does not matter: cosine
    assert name_fidelity(vectors * 7, assigned, names * 3)["fidelity"] == pytest.approx(0.8)


def test_name_fidelity_rejects_mismatched_input_and_reports_nothing_to_score():
    with pytest.raises(ValueError, match="3 vectors but 2"):
        name_fidelity(np.eye(3), np.array([0, 1]), np.eye(3))
    with pytest.raises(ValueError, match="only 2 names"):
        name_fidelity(np.eye(3), np.array([0, 1, 2]), np.eye(3)[:2])
    assert np.isnan(name_fidelity(np.eye(2), np.array([-1, -1]), np.eye(2))["fidelity"])

from __future__ import annotations

import pytest

from failatlas.cluster.metrics import agreement, quality_metrics


def test_metrics_on_a_hand_made_labelling():
    labels = ["a", "a", "a", "a", "b", "b", "b", "c", "c", "c"]
    clusters = [0, 0, 0, 1, 1, 1, -1, 2, 2, 0]
    m = quality_metrics(labels, clusters)
    # clustered items: 9; cluster 0 = {a,a,a,c} -> 3, cluster 1 = {a,b,b} -> 2, cluster 2 = {c,c} -> 2
    assert m["purity"] == pytest.approx(7 / 9)
    assert m["outlier_rate"] == pytest.approx(0.1)
    # a: cluster 0 holds 3 of 4; b: cluster 1 holds 2 of 3 (the outlier never counts); c: cluster 2, 2 of 3
    assert m["per_label_recall"] == pytest.approx({"a": 0.75, "b": 2 / 3, "c": 2 / 3})
    assert m["macro_recall"] == pytest.approx((0.75 + 2 / 3 + 2 / 3) / 3)
    assert (m["n_items"], m["n_labels"], m["n_clusters"]) == (10, 3, 3)
    assert 0 < m["ari"] < 1 and 0 < m["nmi"] < 1


def test_perfect_and_trivial_clusterings():
    perfect = quality_metrics(["x", "x", "y", "y"], [5, 5, 9, 9])
    assert (
        perfect["ari"] == pytest.approx(1) and perfect["nmi"] == pytest.approx(1) and perfect["purity"] == 1
    )
    assert perfect["homogeneity"] == pytest.approx(1) and perfect["completeness"] == pytest.approx(1)
    one = quality_metrics(["x", "x", "y", "y"], [0, 0, 0, 0])
    assert one["ari"] == pytest.approx(0) and one["completeness"] == pytest.approx(1) and one["purity"] == 0.5
    assert agreement([0, 0, 1, 1], [1, 1, 0, 0]) == pytest.approx(1)


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ValueError):
        quality_metrics(["a"], [0, 1])

"""Cluster quality against human labels, and agreement between clusterings.

Conventions (docs/quality.md): outliers (-1) count as one more cluster in ARI, NMI, homogeneity and
completeness, as BERTopic's users evaluate it; purity is over clustered (non-outlier) items, with the outlier
rate beside it; a label's recall is the share of its items that sit in the one cluster holding most of them
(outliers never count).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def quality_metrics(labels_true: Sequence[str], labels_pred: Sequence[int] | np.ndarray) -> dict[str, Any]:
    """ARI, NMI, homogeneity, completeness, V-measure, purity, outlier rate and per-label recall."""
    from sklearn import metrics

    y = np.asarray(labels_true, dtype=object)
    p = np.asarray(labels_pred, dtype=np.int64)
    if y.shape[0] != p.shape[0]:
        raise ValueError(f"{y.shape[0]} labels but {p.shape[0]} cluster assignments")
    n = int(y.shape[0])
    if n == 0:
        raise ValueError("nothing to evaluate: no labelled items")
    names, y_codes = np.unique(y.astype(str), return_inverse=True)
    homogeneity, completeness, v_measure = metrics.homogeneity_completeness_v_measure(y_codes, p)
    clustered = p >= 0
    # contingency[label, cluster] over clustered items only
    clusters, p_codes = np.unique(p[clustered], return_inverse=True)
    contingency = np.zeros((len(names), len(clusters)), dtype=np.int64)
    np.add.at(contingency, (y_codes[clustered], p_codes), 1)
    purity = float(contingency.max(axis=0).sum() / clustered.sum()) if clustered.any() else 0.0
    label_totals = np.bincount(y_codes, minlength=len(names))
    best = contingency.max(axis=1) if len(clusters) else np.zeros(len(names), dtype=np.int64)
    recall = {str(name): float(best[i] / label_totals[i]) for i, name in enumerate(names)}
    return {
        "n_items": n,
        "n_labels": int(len(names)),
        "n_clusters": int(len(clusters)),
        "ari": float(metrics.adjusted_rand_score(y_codes, p)),
        "nmi": float(metrics.normalized_mutual_info_score(y_codes, p)),
        "homogeneity": float(homogeneity),
        "completeness": float(completeness),
        "v_measure": float(v_measure),
        "purity": purity,
        "outlier_rate": float(1.0 - clustered.mean()),
        "macro_recall": float(np.mean(list(recall.values()))),
        "per_label_recall": recall,
        "label_sizes": {str(name): int(label_totals[i]) for i, name in enumerate(names)},
    }


def agreement(labels_a: np.ndarray, labels_b: np.ndarray) -> float:
    """ARI between two clusterings of the same items (outliers as one more cluster)."""
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(np.asarray(labels_a), np.asarray(labels_b)))


def name_fidelity(
    vectors: np.ndarray, assigned: Sequence[int] | np.ndarray, name_vectors: np.ndarray
) -> dict[str, Any]:
    """How well names reconstruct their groups (as Clio checks that summaries reconstruct their clusters):
    every item goes to the group whose name (+ definition) vector is nearest by cosine, and `fidelity` is the
    share that lands in its own group. `assigned` holds each item's group index into `name_vectors` (-1: in no
    group, left out). Also `per_group` (index -> share) and `n_items` counted. Raises ValueError for mismatched
    shapes."""
    v = np.asarray(vectors, dtype=np.float64)
    a = np.asarray(assigned, dtype=np.int64)
    names = np.asarray(name_vectors, dtype=np.float64)
    if v.shape[0] != a.shape[0]:
        raise ValueError(f"{v.shape[0]} vectors but {a.shape[0]} group assignments")
    keep = a >= 0
    if not keep.any() or names.shape[0] == 0:
        return {"fidelity": float("nan"), "n_items": 0, "per_group": {}}
    if a[keep].max() >= names.shape[0]:
        raise ValueError(f"a group index is {int(a[keep].max())} but only {names.shape[0]} names are given")
    v = v[keep] / np.maximum(np.linalg.norm(v[keep], axis=1, keepdims=True), 1e-12)
    names = names / np.maximum(np.linalg.norm(names, axis=1, keepdims=True), 1e-12)
    nearest = (v @ names.T).argmax(axis=1)
    hit = nearest == a[keep]
    per_group = {int(g): float(hit[a[keep] == g].mean()) for g in np.unique(a[keep])}
    return {"fidelity": float(hit.mean()), "n_items": int(keep.sum()), "per_group": per_group}

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

"""Grouping failure types into a few categories per phase: agglomerative clustering of their centroids."""

from __future__ import annotations

import math

import numpy as np


def n_categories(n_types: int, max_categories: int) -> int:
    """How many categories `n_types` types get: about sqrt(n), at least 1, at most `max_categories`."""
    if n_types <= 2:
        return 1
    return max(1, min(max_categories, round(math.sqrt(n_types)), n_types))


def group_centroids(centroids: np.ndarray, weights: np.ndarray, *, max_categories: int) -> np.ndarray:
    """Category label (0..k-1) per type, from Ward clustering of the unit-length centroids (Euclidean distance
    between unit vectors orders pairs as cosine does; Ward keeps categories balanced where average linkage
    leaves one giant category and singletons). Labels are numbered by total weight, largest first."""
    from sklearn.cluster import AgglomerativeClustering

    n = len(centroids)
    k = n_categories(n, max_categories)
    if k == 1:
        return np.zeros(n, dtype=int)
    labels = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(centroids)
    totals = np.array([weights[labels == c].sum() for c in range(k)])
    order = sorted(range(k), key=lambda c: (-totals[c], int(np.flatnonzero(labels == c)[0])))
    remap = {old: new for new, old in enumerate(order)}
    return np.array([remap[c] for c in labels], dtype=int)

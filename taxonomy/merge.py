"""Merging near-duplicate failure types: similar centroids AND shared keywords, so two clusters that say the
same thing in other words become one type (EXP-Bench's own list kept such duplicates)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def keyword_words(keywords: Sequence[str], top: int = 5) -> set[str]:
    """The single words in a type's `top` keywords (bigrams split)."""
    return {w for k in keywords[:top] for w in k.split()}


def merge_groups(
    centroids: np.ndarray,
    keywords: Sequence[Sequence[str]],
    *,
    threshold: float,
    min_shared_keywords: int = 1,
    top_keywords: int = 5,
) -> list[list[int]]:
    """Partition type indices into groups to merge: i and j join (transitively) when the cosine of their
    unit-length centroids is at least `threshold` and their top keywords share at least `min_shared_keywords`
    words. Groups are sorted by their smallest index; singletons are groups too."""
    n = len(centroids)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if n > 1:
        sims = centroids @ centroids.T
        words = [keyword_words(k, top_keywords) for k in keywords]
        for i in range(n):
            for j in range(i + 1, n):
                if sims[i, j] >= threshold and len(words[i] & words[j]) >= min_shared_keywords:
                    parent[find(j)] = find(i)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])

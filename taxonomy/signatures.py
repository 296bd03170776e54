"""Error signatures: the exception class an insight names (NotImplementedError, IndexError, ...). A failure type
whose insights carry different signatures is more than one failure, so it is split by them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_EXCEPTION = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Interrupt|Exit|Warning))\b")
_GENERIC = frozenset({"Error", "Exception", "Warning"})


def error_signature(text: str) -> str | None:
    """The first exception class named in `text` ('ModuleNotFoundError'), or None."""
    for m in _EXCEPTION.finditer(text):
        if m.group(1) not in _GENERIC:
            return m.group(1)
    return None


def split_by_signature(texts: Sequence[str], vectors: np.ndarray, *, min_share: float = 0.1) -> list[np.ndarray]:
    """Row groups of one type: one per error signature held by at least max(2, `min_share` of the rows) rows,
    when there are two or more such signatures; otherwise one group of every row. Rows with no or a rare
    signature join the group whose centroid is nearest to them (`vectors` are unit-length rows)."""
    n = len(texts)
    sigs = [error_signature(t) for t in texts]
    counts = Counter(s for s in sigs if s)
    least = max(2, int(np.ceil(min_share * n)))
    kept = sorted((s for s, c in counts.items() if c >= least), key=lambda s: (-counts[s], s))
    if len(kept) < 2:
        return [np.arange(n)]
    groups = [[i for i in range(n) if sigs[i] == s] for s in kept]
    centroids = np.stack([vectors[g].mean(axis=0) for g in groups])
    centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    for i in range(n):
        if sigs[i] not in kept:
            groups[int(np.argmax(centroids @ vectors[i]))].append(i)
    return [np.array(sorted(g)) for g in groups]

"""A content-addressed cache of UMAP reductions, so re-clustering the same vectors skips UMAP.

UMAP is most of a clustering's time (HDBSCAN on its output takes seconds), and a seeded UMAP is a pure
function of the vectors, its parameters and the library's version. Re-runs that change only the clusterer's
parameters, rename clusters or repeat a run (the stability re-runs included) find their reductions here.
The key hashes the vectors' bytes, so other insights, another embedding or another seed never hit; an
unseeded (parallel) UMAP is not reproducible and is never cached.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from typing import Any, Protocol

import numpy as np

from failatlas.cluster.writes import write_reduction
from failatlas.core.store import Store


class ReductionCache(Protocol):
    def __contains__(self, key: str) -> bool:
        return bool(self.store.query("SELECT 1 FROM cluster_reductions WHERE key = ?", [key]))

    def get(self, key: str) -> np.ndarray | None: ...

    def put(self, key: str, reducer: str, reduced: np.ndarray) -> None: ...


def vectors_digest(X: np.ndarray) -> str:
    """A digest of the matrix's shape, dtype and bytes."""
    X = np.ascontiguousarray(X)
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{X.shape}{X.dtype.str}".encode())
    h.update(memoryview(X).cast("B"))
    return h.hexdigest()


def reduction_key(digest: str, reducer: str, params: dict[str, Any]) -> str | None:
    """The cache key of reducing vectors of `digest` with `reducer(**params)`; None when the result is not
    reproducible (no seed) or the parameters cannot be written down (a precomputed neighbour graph is
    derived from the vectors and the seed, so it is left out)."""
    kept = {k: v for k, v in params.items() if k != "precomputed_knn"}
    if kept.get("random_state") is None:
        return None
    try:
        text = json.dumps(kept, sort_keys=True)
    except TypeError:
        return None
    library = {"umap": "umap-learn", "pca": "scikit-learn"}.get(reducer)
    version = importlib.metadata.version(library) if library else ""
    return hashlib.sha256(f"{digest}\x1f{reducer}\x1f{text}\x1f{library}=={version}".encode()).hexdigest()


class StoreReductionCache:
    """Reductions kept in the store's `cluster_reductions` table (the MAX_REDUCTIONS newest, cluster/writes.py)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.hits = 0
        self.misses = 0

    def __contains__(self, key: str) -> bool:
        return bool(self.store.query("SELECT 1 FROM cluster_reductions WHERE key = ?", [key]))

    def get(self, key: str) -> np.ndarray | None:
        rows = self.store.query("SELECT n_rows, n_dims, vectors FROM cluster_reductions WHERE key = ?", [key])
        if not rows:
            self.misses += 1
            return None
        n_rows, n_dims, blob = rows[0]
        self.hits += 1
        return np.frombuffer(blob, dtype=np.float32).reshape(n_rows, n_dims).copy()

    def put(self, key: str, reducer: str, reduced: np.ndarray) -> None:
        write_reduction(self.store, key, reducer, reduced)

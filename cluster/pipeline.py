"""The clustering pipeline over a matrix of vectors: reduce, cluster, optionally reassign outliers,
project to 2-D.

Store-free and scikit-learn-shaped, so benchmarks and tests can run it on any array.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from failatlas.cluster.components import make_clusterer, make_reducer
from failatlas.cluster.neighbours import exact_knn
from failatlas.cluster.reducers import LARGE_N, UMAPReducer
from failatlas.cluster.reductions import ReductionCache, reduction_key, vectors_digest
from failatlas.cluster.side import SideWorker, fit_umap
from failatlas.cluster.umap_numpy import NUMPY_UMAP_VERSION


def reassign_to_nearest(points: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Labels where each outlier (-1) takes the cluster whose centroid is nearest in `points`."""
    labels = np.asarray(labels)
    clusters = np.unique(labels[labels >= 0])
    outliers = labels < 0
    if clusters.size == 0 or not outliers.any():
        return labels.copy()
    centroids = np.stack([points[labels == c].mean(axis=0) for c in clusters])
    d2 = ((points[outliers, None, :] - centroids[None, :, :]) ** 2).sum(axis=-1)
    out = labels.copy()
    out[outliers] = clusters[np.argmin(d2, axis=1)]
    return out


def relabel_by_size(labels: np.ndarray) -> np.ndarray:
    """Cluster numbers 0, 1, ... from largest to smallest (ties by first appearance); -1 stays -1."""
    labels = np.asarray(labels)
    ids, first, counts = np.unique(labels[labels >= 0], return_index=True, return_counts=True)
    order = ids[np.lexsort((first, -counts))]
    mapping = {int(old): new for new, old in enumerate(order)}
    return np.array([mapping.get(int(v), -1) for v in labels], dtype=np.int32)


# Up to this many insights UMAP's neighbour graph is computed exactly, by blocked matrix products (a few seconds
# at 20,000 on 2 cores), instead of by PyNNDescent: PyNNDescent's functions that take the distance function as an
# argument cannot be kept in numba's file cache and compiled in every process (about 10 s), and its import alone
# compiles for 20 s on a fresh install. Exact neighbours are what NN-descent approximates.
EXACT_KNN_MAX = 20_000


def knn_method(n: int) -> str:
    """How the neighbour graph of `n` points is found: 'umap' (below 4,096 points the reducer searches itself,
    exactly: NumpyUMAP, or umap-learn's small-data path for a metric NumpyUMAP does not compute), 'exact' (ours,
    up to EXACT_KNN_MAX, handed to umap-learn) or 'nndescent' (PyNNDescent)."""
    return "umap" if n < 4096 else "exact" if n <= EXACT_KNN_MAX else "nndescent"


def shared_knn(X: np.ndarray, umap_params: dict[str, Any]) -> tuple | None:
    """UMAP's neighbour graph, computed once and handed to the reducer and the 2-D map (at scale the neighbour
    search is about half of UMAP's time): exact up to EXACT_KNN_MAX points, PyNNDescent's above. None below
    4,096 points, where the reducer's own exact search is cheap."""
    method = knn_method(X.shape[0])
    if method == "umap":
        return None
    metric = umap_params.get("metric", "cosine")
    k = umap_params.get("n_neighbors", 15)
    if method == "exact" and metric in ("cosine", "euclidean"):
        indices, dists = exact_knn(X, k, metric)
        return indices, dists, None
    from umap.umap_ import nearest_neighbors

    from failatlas.cluster.jit import enable_numba_cache

    enable_numba_cache()
    return nearest_neighbors(
        X,
        k,
        metric,
        {},
        metric == "cosine",
        np.random.RandomState(umap_params.get("random_state")),
        n_jobs=1,
    )


def _keyed(params: dict[str, Any], n: int) -> dict[str, Any]:
    """UMAP's parameters as a cache key sees them: with the neighbour search where ours differs from UMAP's own
    (a reduction from an exact graph is another result than one from NN-descent's) and the implementation where
    it is not umap-learn's (see UMAPReducer)."""
    implementation = UMAPReducer.implementation(n, params)
    params = UMAPReducer.unpinned(params)  # a pin names no other result
    if implementation == "numpy":
        return {**params, "umap_implementation": f"numpy-{NUMPY_UMAP_VERSION}"}
    return {**params, "knn": "exact"} if knn_method(n) == "exact" else params


# Below this many insights UMAP's spectral initialisation breaks down (k >= N), a manifold estimate from a
# handful of points means little and HDBSCAN finds no dense region: such a phase is grouped on its embeddings
# directly by average-linkage on cosine distance (statements closer than SMALL_N_DISTANCE join), mapped by PCA.
SMALL_N = 16
SMALL_N_DISTANCE = 0.5


class ClusterPipeline:
    """reducer -> clusterer (-> outlier reassignment) (-> 2-D map). Follows scikit-learn's conventions.

    After `fit(X)`: `reduced_`, `labels_` (final, -1 = outlier unless reassigned), `raw_labels_` (before
    reassignment), `reassigned_` (bool mask), `probabilities_` (or None), `embedding_2d_` (or None),
    `timings_`, `cache_hits_` (which seeded UMAP results came from `cache`: "reduce", "map").
    """

    def __init__(
        self,
        reducer: str = "umap",
        reducer_params: dict[str, Any] | None = None,
        clusterer: str = "hdbscan",
        clusterer_params: dict[str, Any] | None = None,
        reassign_outliers: bool = False,
        map_2d: bool = True,
        random_state: int | None = 42,
        cache: ReductionCache | None = None,
    ) -> None:
        self.reducer = reducer
        self.reducer_params = reducer_params
        self.clusterer = clusterer
        self.clusterer_params = clusterer_params
        self.reassign_outliers = reassign_outliers
        self.map_2d = map_2d
        self.random_state = random_state
        self.cache = cache

    def _reducer_params(self, seed: int | None) -> dict[str, Any]:
        params = dict(self.reducer_params or {})
        if "random_state" in params or self.reducer in ("umap", "pca"):
            params["random_state"] = seed
        return params

    def fit(self, X: np.ndarray, side: SideWorker | None = None) -> ClusterPipeline:
        """Fit on X; with a parallel `side` worker the 2-D map is computed there while the reduction runs here
        (same result)."""
        X = np.asarray(X, dtype=np.float32)
        self._side = side if side is not None and side.parallel else None
        self._map_future = None
        n = X.shape[0]
        self.timings_: dict[str, float] = {}
        self.cache_hits_: list[str] = []
        self._digest = None
        self._map_from_cache = None
        tick = time.perf_counter()
        probabilities = None
        self.reducer_used_ = "none" if self.reducer == "umap" and n < SMALL_N else self.reducer
        self.umap_implementation_: str | None = None
        self.clusterer_used_ = self.clusterer
        if n < 2:
            self.reduced_ = X
            self.raw_labels_ = np.zeros(n, dtype=np.int32)  # a single statement is its own type
        else:
            params = self._reducer_params(self.random_state) if self.reducer_used_ == self.reducer else {}
            if self.reducer_used_ == "umap":
                self.umap_implementation_ = UMAPReducer.implementation(n, params)
            self._digest = vectors_digest(X) if self.cache is not None and self.reducer_used_ == "umap" else None
            reduce_key = self.reduction_key(X, self._digest) if self._digest else None
            self.reduced_ = self.cache.get(reduce_key) if reduce_key else None
            self._map_from_cache = self._cached_map(n)
            self.knn_ = None
            if self.reducer_used_ == "umap" and (self.reduced_ is None or (
                    self.map_2d and self._map_from_cache is None)):
                self.knn_ = shared_knn(X, params)
            if self._side is not None and self.needs_umap_map(n) and self._map_from_cache is None:
                self._map_future = self._side.submit(fit_umap, X, self._map_fit_params(n))
            if self.reduced_ is not None:
                self.cache_hits_.append("reduce")
            else:
                if self.knn_ is not None:
                    params["precomputed_knn"] = self.knn_
                self.reduced_ = np.asarray(
                    make_reducer(self.reducer_used_, **params).fit_transform(X), dtype=np.float32
                )
                if reduce_key:
                    self.cache.put(reduce_key, "umap", self.reduced_)
            self.timings_["reduce"], tick = time.perf_counter() - tick, time.perf_counter()
            if n < SMALL_N and self.clusterer in ("hdbscan", "fast_hdbscan"):
                self.clusterer_used_ = "agglomerative"
                clusterer = make_clusterer("agglomerative", linkage="average", metric="cosine",
                                           distance_threshold=SMALL_N_DISTANCE)
            else:
                self.clusterer_used_ = self.clusterer
                clusterer = make_clusterer(self.clusterer, **(self.clusterer_params or {}))
            self.raw_labels_ = relabel_by_size(clusterer.fit_predict(self.reduced_))
            probabilities = getattr(clusterer, "probabilities_", None)
            if (self.raw_labels_ < 0).all() and self.clusterer_used_ in ("hdbscan", "fast_hdbscan"):
                # No dense region at all (a small phase): group the statements themselves, as for tiny phases,
                # rather than leave every insight an outlier with no failure type.
                self.clusterer_used_ = "agglomerative"
                fallback = make_clusterer("agglomerative", linkage="average", metric="cosine",
                                          distance_threshold=SMALL_N_DISTANCE)
                self.raw_labels_ = relabel_by_size(fallback.fit_predict(X))
                probabilities = None
        self.probabilities_ = None if probabilities is None else np.asarray(probabilities, dtype=np.float64)
        if self.reassign_outliers:
            self.labels_ = reassign_to_nearest(self.reduced_, self.raw_labels_)
        else:
            self.labels_ = self.raw_labels_.copy()
        self.reassigned_ = (self.raw_labels_ < 0) & (self.labels_ >= 0)
        self.timings_["cluster"], tick = time.perf_counter() - tick, time.perf_counter()
        self.embedding_2d_ = self._project(X) if self.map_2d else None
        self.timings_["map"] = time.perf_counter() - tick
        return self

    def fit_predict(self, X: np.ndarray) -> np.ndarray:
        return self.fit(X).labels_

    def project(self, X: np.ndarray) -> np.ndarray:
        """The 2-D map `fit` gives for X (map_2d), computed alone: what a deferred map needs later. Reads and
        writes the map through `cache` as `fit` does."""
        X = np.asarray(X, dtype=np.float32)
        n = X.shape[0]
        if not self.needs_umap_map(n) or not self.map_2d:
            # a tiny phase's PCA map, or a 2-D reduction that is the map itself: the fit gives it
            return ClusterPipeline(**{**self.get_params(), "map_2d": True}).fit(X).embedding_2d_
        self._side, self._map_future, self.cache_hits_ = None, None, []
        self.reduced_ = None
        self._digest = vectors_digest(X) if self.cache is not None and self.reducer == "umap" else None
        self._map_from_cache = self._cached_map(n)
        self.knn_ = None
        if self.reducer == "umap" and self._map_from_cache is None:
            self.knn_ = shared_knn(X, self._reducer_params(self.random_state))
        return self._project(X)

    def map_in_cache(self, X: np.ndarray) -> bool:
        """Whether `cache` holds the UMAP map `fit` would compute for X (computes and counts nothing)."""
        X = np.asarray(X, dtype=np.float32)
        n = X.shape[0]
        if self.cache is None or self.reducer != "umap" or not self.needs_umap_map(n):
            return False
        self._digest = vectors_digest(X)
        key = self._key("umap", self._map_params(n), n)
        return key is not None and key in self.cache

    def get_params(self) -> dict[str, Any]:
        """The constructor's arguments (scikit-learn's convention)."""
        return {k: v for k, v in self.__dict__.items() if not k.endswith("_") and not k.startswith("_")}

    def _project(self, X: np.ndarray) -> np.ndarray:
        n = X.shape[0]
        if n < 4:
            return np.column_stack([np.arange(n, dtype=np.float64), np.zeros(n)])
        if n < SMALL_N:
            from sklearn.decomposition import PCA

            return np.asarray(PCA(n_components=2, random_state=self.random_state).fit_transform(X), dtype=np.float64)
        if self.reducer == "umap" and self.reduced_ is not None and self.reduced_.shape[1] == 2:
            return self.reduced_.astype(np.float64)
        if self._map_from_cache is not None:
            self.cache_hits_.append("map")
            return self._map_from_cache.astype(np.float64)
        key = self._key("umap", self._map_params(n), n)
        future = self._map_future  # computed in the side process while the reduction ran here
        xy = future.result() if future is not None else fit_umap(X, self._map_fit_params(n))
        if key:
            self.cache.put(key, "umap", xy)
        return xy.astype(np.float64)

    def needs_umap_map(self, n: int) -> bool:
        """Whether `_project` computes the map with UMAP (not PCA, not the reduction itself)."""
        return self.map_2d and n >= SMALL_N and not (
            self.reducer == "umap" and (self.reducer_params or {}).get("n_components") == 2)

    def _map_fit_params(self, n: int) -> dict[str, Any]:
        """The map's UMAP parameters with the shared neighbour graph's first k columns (the k nearest, in order)."""
        params = self._map_params(n)
        if getattr(self, "knn_", None) is not None:
            k = params["n_neighbors"]
            params["precomputed_knn"] = (self.knn_[0][:, :k].copy(), self.knn_[1][:, :k].copy(), None)
        return params

    def reduction_key(self, X: np.ndarray, digest: str | None = None) -> str | None:
        """The cache key of this pipeline's UMAP reduction of X (None when not cacheable); `digest` is X's
        `vectors_digest` when already known."""
        X = np.asarray(X, dtype=np.float32)
        if self.reducer != "umap" or X.shape[0] < SMALL_N:
            return None
        return reduction_key(digest or vectors_digest(X), "umap",
                             _keyed(self._reducer_params(self.random_state), X.shape[0]))

    def _map_params(self, n: int) -> dict[str, Any]:
        """The 2-D map's UMAP: the reducer's neighbourhood and start, 2 dimensions, min_dist 0.1. From LARGE_N
        insights on it uses the 15 nearest of the shared neighbour graph (UMAP's default neighbourhood): the
        map is for the eye, and a wide neighbourhood made it cost as much as the reduction itself."""
        params = {**(self.reducer_params or {}), "n_components": 2, "min_dist": 0.1}
        params.setdefault("n_neighbors", min(15, n - 1))
        if n >= LARGE_N:
            params["n_neighbors"] = min(params["n_neighbors"], 15)
        params.setdefault("metric", "cosine")
        return {**params, "random_state": self.random_state}

    def _key(self, reducer: str, params: dict[str, Any], n: int) -> str | None:
        return reduction_key(self._digest, reducer, _keyed(params, n)) if self._digest else None

    def _cached_map(self, n: int) -> np.ndarray | None:
        """The 2-D map from the cache when `_project` would compute it with UMAP, else None."""
        if not self.needs_umap_map(n):
            return None
        key = self._key("umap", self._map_params(n), n)
        return self.cache.get(key) if key else None

"""UMAP for small data in numpy, with no numba: the reducer `umap` below NUMPY_UMAP_MAX points.

umap-learn compiles its numba code on first use: on a fresh install about 20 s before the first fit (its import
alone compiles PyNNDescent for about 10 s), most of a first clustering of a few thousand insights
(benchmarks/RESULTS.md, issue 21). Below NUMPY_UMAP_MAX points this module runs the same algorithm with nothing
to compile: exact neighbours, the fuzzy simplicial set (per-point bandwidths by binary search, fuzzy union), a
spectral start (PCA where the graph is disconnected), then negative-sampling SGD on the same low-dimensional curve
and the same edge schedule.

One difference is deliberate: umap-learn applies each edge's move at once, one after another; here every move of
an epoch is computed from the positions at the epoch's start and the moves are added up, each point's sum divided
by the square root of the number of moves it received (so a point on many edges does not overshoot). The result is
not umap-learn's to the bit; measured against known kinds on the same vectors and the same HDBSCAN, the clusters
were as good (benchmarks/RESULTS.md, `benchmarks/umap_small.py`, mean ARI over 5 seeds: 0.355 vs umap-learn's
0.345 at 655 points, 0.362 vs 0.320 at 1,902, 0.131 vs 0.134 on TRAIL's 501, within one standard deviation).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from failatlas.cluster.neighbours import exact_knn

# Below this many points the reducer `umap` runs here; from it on, umap-learn (its compiled code pays off there
# and our exact neighbour graph is handed to it). The same bound as UMAP's own small-data path.
NUMPY_UMAP_MAX = 4096
METRICS = ("cosine", "euclidean")

_SMOOTH_K_TOLERANCE = 1e-5
_MIN_K_DIST_SCALE = 1e-3


# Part of the reduction cache key of every NumpyUMAP result: raise it when a change here changes results.
NUMPY_UMAP_VERSION = 1
INITS = (None, "spectral", "pca", "random")
_OPTIONS = {"n_neighbors", "n_components", "min_dist", "metric", "init", "random_state", "n_jobs",
            "precomputed_knn", "n_epochs", "spread", "negative_sample_rate"}


def supports(n: int, params: dict[str, Any], *, any_size: bool = False) -> bool:
    """Whether a UMAP fit of `n` points with `params` runs here: small data (any size with `any_size`), a metric
    we compute exactly, a start we compute, and no option only umap-learn knows."""
    return ((any_size or n < NUMPY_UMAP_MAX) and params.get("metric", "cosine") in METRICS
            and params.get("init") in INITS and set(params) <= _OPTIONS)


def smooth_knn_dist(dists: np.ndarray, k: float, n_iter: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(sigma, rho) per point, as UMAP's `smooth_knn_dist` with local_connectivity 1: rho = the distance to the
    nearest other point, sigma such that the memberships of the k neighbours sum to log2(k). `dists` hold each
    point's k neighbour distances, itself first."""
    d = dists.astype(np.float64)
    n = d.shape[0]
    target = np.log2(k)
    positive = np.where(d > 0, d, np.inf)
    rho = positive.min(axis=1)
    rho[~np.isfinite(rho)] = 0.0
    lo, hi, mid = np.zeros(n), np.full(n, np.inf), np.ones(n)
    done = np.zeros(n, dtype=bool)
    rest = d[:, 1:] - rho[:, None]
    for _ in range(n_iter):
        psum = np.where(rest > 0, np.exp(-np.maximum(rest, 0.0) / mid[:, None]), 1.0).sum(axis=1)
        done |= np.abs(psum - target) < _SMOOTH_K_TOLERANCE
        if done.all():
            break
        high = ~done & (psum > target)
        low = ~done & ~(psum > target)
        hi = np.where(high, mid, hi)
        lo = np.where(low, mid, lo)
        mid = np.where(high, (lo + hi) / 2.0, np.where(low, np.where(np.isinf(hi), mid * 2.0, (lo + hi) / 2.0), mid))
    floor = _MIN_K_DIST_SCALE * np.where(rho > 0, d.mean(axis=1), d.mean())
    return np.maximum(mid, floor), rho


def fuzzy_graph(indices: np.ndarray, dists: np.ndarray, k: int):  # noqa: ANN201 - a scipy CSR matrix
    """The symmetric fuzzy simplicial set (fuzzy union of each point's memberships) as a CSR matrix."""
    import scipy.sparse as sp

    n, width = indices.shape
    d = dists.astype(np.float64)
    sigma, rho = smooth_knn_dist(d, float(k))
    over = d - rho[:, None]
    member = np.where(over <= 0, 1.0, np.exp(-np.maximum(over, 0.0) / sigma[:, None]))
    member[indices == np.arange(n)[:, None]] = 0.0
    member[indices < 0] = 0.0
    rows = np.repeat(np.arange(n), width)
    p = sp.csr_matrix((member.ravel(), (rows, np.maximum(indices, 0).ravel())), shape=(n, n))
    p.eliminate_zeros()
    pt = p.T.tocsr()
    g = (p + pt - p.multiply(pt)).tocsr()
    g.eliminate_zeros()
    return g


def curve_params(spread: float = 1.0, min_dist: float = 0.0) -> tuple[float, float]:
    """UMAP's (a, b): the curve 1 / (1 + a d^(2b)) fitted to exp(-(d - min_dist) / spread) beyond min_dist."""
    from scipy.optimize import curve_fit

    def curve(x: np.ndarray, a: float, b: float) -> np.ndarray:
        return 1.0 / (1.0 + a * x ** (2 * b))

    xv = np.linspace(0, spread * 3, 300)
    yv = np.where(xv < min_dist, 1.0, np.exp(-(xv - min_dist) / spread))
    (a, b), _ = curve_fit(curve, xv, yv)
    return float(a), float(b)


def _scaled(coords: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    coords = coords * (10.0 / max(float(np.abs(coords).max()), 1e-12))
    return coords + rng.normal(scale=0.0001, size=coords.shape)


def initial_layout(X: np.ndarray, graph, dim: int, init: str, rng: np.random.RandomState) -> np.ndarray:  # noqa: ANN001
    """The start: the graph's spectral embedding (the normalised Laplacian's smallest non-trivial eigenvectors),
    PCA of X for 'pca' or where the graph is disconnected or the eigensolver fails, uniform noise for 'random';
    scaled into [0, 10] per dimension as UMAP does."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    n = X.shape[0]
    coords = None
    if init == "random":
        coords = rng.uniform(low=-10.0, high=10.0, size=(n, dim))
    elif init == "spectral" and dim + 1 < n and connected_components(graph, directed=False)[0] == 1:
        degree = np.asarray(graph.sum(axis=0)).ravel()
        inv = sp.diags(1.0 / np.sqrt(degree))
        laplacian = sp.identity(n, format="csr") - inv @ graph @ inv
        k = dim + 1
        try:
            values, vectors = sp.linalg.eigsh(laplacian, k, which="SM", ncv=max(2 * k + 1, int(np.sqrt(n))),
                                              tol=1e-4, v0=np.ones(n), maxiter=n * 5)
            coords = _scaled(vectors[:, np.argsort(values)[1:k]], rng)
        except (sp.linalg.ArpackError, sp.linalg.ArpackNoConvergence):
            coords = None
    if coords is None:
        from sklearn.decomposition import PCA

        width = min(dim, X.shape[1], n)
        start = PCA(n_components=width, random_state=rng).fit_transform(X)
        if width < dim:
            start = np.hstack([start, np.zeros((n, dim - width))])
        coords = _scaled(start, rng)
    span = coords.max(axis=0) - coords.min(axis=0)
    return 10.0 * (coords - coords.min(axis=0)) / np.where(span > 0, span, 1.0)


def optimize_layout(
    coords: np.ndarray, graph, n_epochs: int, a: float, b: float, rng: np.random.Generator,  # noqa: ANN001
    negative_sample_rate: int = 5,
) -> np.ndarray:
    """UMAP's SGD: each edge is sampled in proportion to its weight (attracting both ends), each sample followed by
    `negative_sample_rate` repelling samples of random points; the learning rate falls linearly from 1 to 0.
    Moves within an epoch are summed from the epoch's start positions (see the module's docstring)."""
    g = graph.tocoo()
    w = g.data.astype(np.float64)
    keep = w >= w.max() / n_epochs
    head, tail, w = g.row[keep].astype(np.int64), g.col[keep].astype(np.int64), w[keep]
    n, dim = coords.shape
    every = w.max() / w  # epochs between two samples of an edge
    next_at = every.copy()
    every_neg = every / negative_sample_rate
    next_neg = every_neg.copy()
    y = np.ascontiguousarray(coords, dtype=np.float64)
    offsets = np.arange(dim)

    def scatter(index: np.ndarray, moves: np.ndarray) -> np.ndarray:
        flat = (index[:, None] * dim + offsets).ravel()
        return np.bincount(flat, weights=moves.ravel(), minlength=n * dim).reshape(n, dim)

    for epoch in range(n_epochs):
        alpha = 1.0 - epoch / n_epochs
        active = np.flatnonzero(next_at <= epoch)
        if active.size == 0:
            continue
        j, k = head[active], tail[active]
        diff = y[j] - y[k]
        d2 = np.einsum("ij,ij->i", diff, diff)
        safe = np.where(d2 > 0, d2, 1.0)
        pow_b = safe**b
        coeff = np.where(d2 > 0, -2.0 * a * b * pow_b / safe / (a * pow_b + 1.0), 0.0)
        move = np.clip(coeff[:, None] * diff, -4.0, 4.0) * alpha
        step = scatter(j, move) - scatter(k, move)
        count = np.bincount(j, minlength=n) + np.bincount(k, minlength=n)
        next_at[active] += every[active]
        n_neg = np.maximum(((epoch - next_neg[active]) / every_neg[active]).astype(np.int64), 0)
        next_neg[active] += n_neg * every_neg[active]
        src = np.repeat(j, n_neg)
        if src.size:
            dst = rng.integers(0, n, src.size)
            diff = y[src] - y[dst]
            d2 = np.einsum("ij,ij->i", diff, diff)
            safe = np.where(d2 > 0, d2, 1.0)
            coeff = np.where(d2 > 0, 2.0 * b / ((0.001 + safe) * (a * safe**b + 1.0)), 0.0)
            step += scatter(src, np.clip(coeff[:, None] * diff, -4.0, 4.0) * alpha)
        y += step / np.sqrt(np.maximum(count, 1))[:, None]
    return y.astype(np.float32)


class NumpyUMAP:
    """UMAP (same parameters, same meaning) computed in numpy; see the module's docstring. scikit-learn shaped:
    `fit_transform(X)` sets `embedding_` and `graph_` and returns the embedding."""

    def __init__(
        self,
        n_neighbors: int = 15,
        n_components: int = 2,
        min_dist: float = 0.1,
        metric: str = "euclidean",
        init: str | None = "spectral",
        random_state: int | None = None,
        n_epochs: int | None = None,
        spread: float = 1.0,
        negative_sample_rate: int = 5,
        precomputed_knn: tuple | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.n_components = n_components
        self.min_dist = min_dist
        self.metric = metric
        self.init = init
        self.random_state = random_state
        self.n_epochs = n_epochs
        self.spread = spread
        self.negative_sample_rate = negative_sample_rate
        self.precomputed_knn = precomputed_knn
        self.n_jobs = n_jobs  # accepted for umap-learn's signature; this runs on one core

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        """The low-dimensional embedding of X (float32). Raises ValueError for a metric other than cosine or
        euclidean, a start other than spectral, pca or random, fewer than 3 points, or non-finite values."""
        X = np.asarray(X, dtype=np.float32)
        n = X.shape[0]
        if self.metric not in METRICS:
            raise ValueError(f"NumpyUMAP computes {', '.join(METRICS)} only, not {self.metric!r}")
        if n < 3:
            raise ValueError(f"UMAP needs at least 3 points, got {n}")
        if not np.isfinite(X).all():
            raise ValueError("UMAP's input holds NaN or infinite values")
        k = max(2, min(self.n_neighbors, n - 1))
        knn = self.precomputed_knn
        if knn is not None and knn[0] is not None and knn[0].shape[0] == n and knn[0].shape[1] >= k:
            indices, dists = np.asarray(knn[0])[:, :k], np.asarray(knn[1])[:, :k]
        else:
            indices, dists = exact_knn(X, k, self.metric)
        self.graph_ = fuzzy_graph(indices, dists, k)
        legacy = np.random.RandomState(self.random_state)
        if self.init not in INITS:
            raise ValueError(f"NumpyUMAP starts from spectral, pca or random, not {self.init!r}")
        start = initial_layout(X, self.graph_, self.n_components, self.init or "spectral", legacy)
        n_epochs = self.n_epochs or (500 if n <= 10_000 else 200)
        a, b = curve_params(self.spread, self.min_dist)
        self.embedding_ = optimize_layout(start, self.graph_, n_epochs, a, b,
                                          np.random.default_rng(self.random_state), self.negative_sample_rate)
        return self.embedding_

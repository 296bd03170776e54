"""Stability: how much a clustering agrees with re-runs under another seed or on resampled data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from failatlas.cluster.metrics import agreement
from failatlas.cluster.pipeline import SMALL_N, ClusterPipeline
from failatlas.cluster.reducers import UMAPReducer
from failatlas.cluster.side import Later, SideWorker

# UMAP's own default below/above 10,000 points; a capped re-run keeps the epochs of the full fit
_UMAP_EPOCHS_LARGE = 200
_UMAP_EPOCHS_SMALL_N = 10_000


@dataclass
class Rerun:
    kind: str  # "seed", "resample" or "subsample"
    seed: int
    idx: np.ndarray  # the items it clusters
    params: dict[str, Any]  # ClusterPipeline keyword arguments


def _scaled(clusterer_params: dict[str, Any] | None, fraction: float) -> dict[str, Any] | None:
    """HDBSCAN's size bounds scaled to a sample holding `fraction` of the items (a cluster of 200 of 40,000
    has about 50 items in a sample of 10,000)."""
    if not clusterer_params or "min_cluster_size" not in clusterer_params:
        return clusterer_params
    scaled = dict(clusterer_params)
    scaled["min_cluster_size"] = max(5, round(clusterer_params["min_cluster_size"] * fraction))
    if clusterer_params.get("min_samples"):
        scaled["min_samples"] = max(2, round(clusterer_params["min_samples"] * fraction))
    return scaled


def plan_reruns(
    n: int, pipeline: ClusterPipeline, *, runs: int = 2, resample_fraction: float = 0.8, seed: int = 42,
    max_items: int | None = None,
) -> list[Rerun]:
    """The re-runs `stability` makes for `n` items: alternately another seed on all items and a seeded resample
    (`resample_fraction` of the items, without replacement); with more than `max_items` items every re-run is a
    "subsample": another seed on a seeded sample of `max_items`, HDBSCAN's size bounds scaled to the sample and
    UMAP's epochs kept at the full fit's, so that stability costs a bounded time at any scale."""
    params = {k: v for k, v in pipeline.__dict__.items() if not k.endswith("_") and not k.startswith("_")}
    if params.get("reducer") == "umap" and n >= SMALL_N:
        # a re-run on fewer items would otherwise cross NUMPY_UMAP_MAX and measure the other implementation
        reducer_params = params.get("reducer_params") or {}
        params["reducer_params"] = {**reducer_params, "implementation": UMAPReducer.implementation(
            n, pipeline._reducer_params(pipeline.random_state))}
    capped = max_items is not None and n > max_items
    reruns = []
    for i in range(runs):
        run_seed = seed + 1 + i
        rerun_seed = None if pipeline.random_state is None else run_seed  # parallel mode stays unseeded
        rerun_params = {**params, "map_2d": False, "random_state": rerun_seed}
        if capped:
            kind = "subsample"
            idx = np.sort(np.random.default_rng(run_seed).choice(n, size=max_items, replace=False))
            rerun_params["clusterer_params"] = _scaled(params.get("clusterer_params"), max_items / n)
            if params.get("reducer") == "umap" and n > _UMAP_EPOCHS_SMALL_N:
                reducer_params = params.get("reducer_params") or {}
                rerun_params["reducer_params"] = {"n_epochs": _UMAP_EPOCHS_LARGE, **reducer_params}
        elif i % 2 == 0 or n < 10:
            kind, idx = "seed", np.arange(n)
        else:
            kind = "resample"
            rng = np.random.default_rng(run_seed)
            idx = np.sort(rng.choice(n, size=max(3, round(n * resample_fraction)), replace=False))
        reruns.append(Rerun(kind, run_seed, idx, rerun_params))
    return reruns


def reruns_cached(X: np.ndarray, reruns: list[Rerun]) -> bool:
    """Whether every re-run is cheap now: its reducer is not UMAP, or its UMAP result is in its pipeline's cache
    (then a re-run costs only the clusterer)."""
    for rerun in reruns:
        pipeline, Xi = ClusterPipeline(**rerun.params), X[rerun.idx]
        if pipeline.reducer != "umap" or Xi.shape[0] < SMALL_N:
            continue
        cache = rerun.params.get("cache")
        key = pipeline.reduction_key(Xi) if cache is not None else None
        if key is None or key not in cache:
            return False
    return True


def _labels(pipeline: ClusterPipeline, X: np.ndarray) -> np.ndarray:
    return pipeline.fit(X).labels_


def start_reruns(X: np.ndarray, reruns: list[Rerun], side: SideWorker) -> list[Any]:
    """Start the re-runs' fits; each returned future's result is the re-run's labels. With a parallel `side`
    worker the fits whose reduction is not in the pipeline's cache run in the side process (their reductions go
    into the cache when collected); the others run here when their result is asked for."""
    futures: list[Any] = []
    for rerun in reruns:
        pipeline, Xi = ClusterPipeline(**rerun.params), X[rerun.idx]
        cache = rerun.params.get("cache")
        key = pipeline.reduction_key(Xi) if cache is not None else None
        if side.parallel and (key is None or key not in cache):
            futures.append(_Collect(side.submit(fit_pipeline, {**rerun.params, "cache": None}, Xi), cache, key))
        else:
            futures.append(Later(_labels, (pipeline, Xi)))
    return futures


class _Collect:
    """A side-process re-run's labels; its reduction goes into the cache when collected."""

    def __init__(self, future: Any, cache: Any, key: str | None) -> None:
        self.future, self.cache, self.key = future, cache, key

    def result(self) -> np.ndarray:
        labels, reduced = self.future.result()
        if self.key is not None:
            self.cache.put(self.key, "umap", reduced)
        return labels


def score_reruns(
    reruns: list[Rerun], futures: list[Any], labels: np.ndarray, *, resample_fraction: float = 0.8,
    max_items: int | None = None,
) -> dict[str, Any]:
    """The ARI of each re-run against `labels` on the items both saw, and their mean."""
    rows = [
        {"kind": r.kind, "seed": r.seed, "n_items": int(r.idx.size), "ari": agreement(labels[r.idx], f.result())}
        for r, f in zip(reruns, futures, strict=True)
    ]
    mean = float(np.mean([r["ari"] for r in rows])) if rows else None
    return {"mean_ari": mean, "runs": rows, "resample_fraction": resample_fraction, "max_items": max_items}


def stability(
    X: np.ndarray,
    labels: np.ndarray,
    pipeline: ClusterPipeline,
    *,
    runs: int = 2,
    resample_fraction: float = 0.8,
    seed: int = 42,
    max_items: int | None = None,
) -> dict[str, Any]:
    """Re-run `pipeline` `runs` times (see `plan_reruns`) in this process and report the ARI of each re-run
    against `labels` on the items both saw. The 2-D map is not recomputed."""
    reruns = plan_reruns(X.shape[0], pipeline, runs=runs, resample_fraction=resample_fraction, seed=seed,
                         max_items=max_items)
    futures = start_reruns(X, reruns, SideWorker(1))
    return score_reruns(reruns, futures, labels, resample_fraction=resample_fraction, max_items=max_items)


def fit_pipeline(params: dict[str, Any], X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A ClusterPipeline fit without cache or map (in the side process): (labels, reduced)."""
    pipeline = ClusterPipeline(**{**params, "cache": None, "map_2d": False}).fit(X)
    return pipeline.labels_, pipeline.reduced_

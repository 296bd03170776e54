"""Stability: how much a clustering agrees with re-runs under another seed or on resampled data."""

from __future__ import annotations

from typing import Any

import numpy as np

from cluster.metrics import agreement
from cluster.pipeline import ClusterPipeline

# UMAP's own default below/above 10,000 points; a capped re-run keeps the epochs of the full fit
_UMAP_EPOCHS_LARGE = 200
_UMAP_EPOCHS_SMALL_N = 10_000


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
    """Re-run `pipeline` `runs` times, alternately with another seed on all items and on a seeded resample
    (`resample_fraction` of the items, without replacement), and report the ARI of each re-run against
    `labels` on the items both saw. The 2-D map is not recomputed.

    With more than `max_items` items every re-run is a "subsample": another seed on a seeded sample of
    `max_items` items, HDBSCAN's size bounds scaled to the sample and UMAP's epochs kept at the full fit's,
    so that stability costs a bounded time at any scale."""
    params = {k: v for k, v in pipeline.__dict__.items() if not k.endswith("_") and not k.startswith("_")}
    rows: list[dict[str, Any]] = []
    n = X.shape[0]
    capped = max_items is not None and n > max_items
    for i in range(runs):
        run_seed = seed + 1 + i
        rerun_seed = None if pipeline.random_state is None else run_seed  # parallel mode stays unseeded
        rerun_params = {**params, "map_2d": False, "random_state": rerun_seed}
        if capped:
            kind = "subsample"
            rng = np.random.default_rng(run_seed)
            idx = np.sort(rng.choice(n, size=max_items, replace=False))
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
        other = ClusterPipeline(**rerun_params).fit(X[idx]).labels_
        rows.append(
            {"kind": kind, "seed": run_seed, "n_items": int(idx.size), "ari": agreement(labels[idx], other)}
        )
    mean = float(np.mean([r["ari"] for r in rows])) if rows else None
    return {"mean_ari": mean, "runs": rows, "resample_fraction": resample_fraction,
            "max_items": max_items}

"""Stability: how much a clustering agrees with re-runs under another seed or on resampled data."""

from __future__ import annotations

from typing import Any

import numpy as np

from cluster.metrics import agreement
from cluster.pipeline import ClusterPipeline


def stability(
    X: np.ndarray,
    labels: np.ndarray,
    pipeline: ClusterPipeline,
    *,
    runs: int = 2,
    resample_fraction: float = 0.8,
    seed: int = 42,
) -> dict[str, Any]:
    """Re-run `pipeline` `runs` times, alternately with another seed on all items and on a seeded resample
    (`resample_fraction` of the items, without replacement), and report the ARI of each re-run against
    `labels`
    on the items both saw. The 2-D map is not recomputed."""
    params = pipeline.__dict__.copy()
    params = {k: v for k, v in params.items() if not k.endswith("_")}
    rows: list[dict[str, Any]] = []
    n = X.shape[0]
    for i in range(runs):
        run_seed = seed + 1 + i
        rerun_seed = None if pipeline.random_state is None else run_seed  # parallel mode stays unseeded
        rerun = ClusterPipeline(**{**params, "map_2d": False, "random_state": rerun_seed})
        if i % 2 == 0 or n < 10:
            kind, idx = "seed", np.arange(n)
        else:
            kind = "resample"
            rng = np.random.default_rng(run_seed)
            idx = np.sort(rng.choice(n, size=max(3, round(n * resample_fraction)), replace=False))
        other = rerun.fit(X[idx]).labels_
        rows.append(
            {"kind": kind, "seed": run_seed, "n_items": int(idx.size), "ari": agreement(labels[idx], other)}
        )
    mean = float(np.mean([r["ari"] for r in rows])) if rows else None
    return {"mean_ari": mean, "runs": rows, "resample_fraction": resample_fraction}

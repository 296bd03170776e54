"""The one 95% interval of a proportion that every score and share prints: Wilson's score interval.

Why Wilson (docs/metrics.md, "Confidence intervals"): it keeps its width at 0 of n and n of n, where a percentile
bootstrap over a handful of tasks collapses to a point ("1.00–1.00" for 4 of 4), and its coverage stays close to
95% at small n, where the normal (Wald) interval fails; unlike Clopper–Pearson it is not conservative by design,
and it is one closed formula, so the terminal, the exports and the app cannot disagree."""

from __future__ import annotations

import numpy as np

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson(count: np.ndarray | float, total: np.ndarray | float, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval of the proportion count/total (arrays or scalars; `count` need not be whole, e.g. a
    mean over tasks times their number); (nan, nan) where total is 0."""
    k = np.asarray(count, dtype=float)
    n = np.asarray(total, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)

"""The one interval of a proportion (`failatlas.core.intervals.wilson`) against values worked by hand from Wilson's
formula: at n of n its lower end is n / (n + z^2), at 0 of n its upper end is z^2 / (n + z^2)."""

from __future__ import annotations

import numpy as np
import pytest

from failatlas.core.intervals import Z95, wilson


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (4, 4, 0.5101, 1.0),  # 4 / (4 + 1.96^2): 4 tasks of 4 do not prove a rate of 1
    (0, 4, 0.0, 0.4899),
    (2, 4, 0.1500, 0.8500),
    (5, 5, 0.5655, 1.0),
    (1, 1, 0.2065, 1.0),
    (0, 10, 0.0, 0.2775),
    (81, 263, 0.2553, 0.3662),  # Newcombe 1998's worked example
])
def test_wilson_matches_known_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = (float(v) for v in wilson(k, n))
    assert (lo, hi) == pytest.approx((low, high), abs=6e-5)
    assert hi - lo > 0.1  # never a point at small n, whatever k is


def test_wilson_edges_follow_the_closed_forms_and_empty_has_none() -> None:
    for n in (1, 2, 3, 4, 5, 12):
        assert float(wilson(n, n)[0]) == pytest.approx(n / (n + Z95**2))
        assert float(wilson(0, n)[1]) == pytest.approx(Z95**2 / (n + Z95**2))
    lo, hi = wilson(np.array([1, 0]), np.array([2, 0]))
    assert lo[0] == pytest.approx(1 - hi[0]) and np.isnan(lo[1]) and np.isnan(hi[1])

"""The intervals Compare and the share of runs print, against the published worked examples: Wilson's score interval
and Newcombe's hybrid score interval for a difference of two independent proportions (R. G. Newcombe, "Interval
estimation for the difference between independent proportions: comparison of eleven methods", Statistics in
Medicine 17, 1998, table II, method 10), and the one way every interval is printed."""

from __future__ import annotations

import pytest

from failatlas.core.intervals import wilson
from failatlas.core.tables import counted, interval_text
from failatlas.taxonomy.prevalence import share_difference


@pytest.mark.parametrize(("k1", "n1", "k2", "n2", "low", "high"), [
    (56, 70, 48, 80, 0.0524, 0.3339),
    (9, 10, 3, 10, 0.1705, 0.8090),
    (5, 56, 0, 29, -0.0381, 0.1926),
    (0, 10, 0, 20, -0.1611, 0.2775),
    (0, 10, 0, 10, -0.2775, 0.2775),
    (10, 10, 0, 20, 0.6791, 1.0000),
    (10, 10, 0, 10, 0.6075, 1.0000),
])
def test_newcombe_hybrid_score_interval_matches_the_paper(k1, n1, k2, n2, low, high) -> None:  # noqa: ANN001
    d, lo, hi = share_difference(k1, n1, k2, n2)
    assert d == pytest.approx(k1 / n1 - k2 / n2)
    assert (lo, hi) == pytest.approx((low, high), abs=6e-5)


def test_wilson_keeps_its_width_at_the_edges_and_an_empty_side_has_none() -> None:
    assert tuple(map(float, wilson(81, 263))) == pytest.approx((0.2553, 0.3662), abs=6e-5)
    low, high = map(float, wilson(0, 5))
    assert low == 0.0 and high == pytest.approx(0.4345, abs=6e-5)  # a bootstrap would say [0, 0]
    assert share_difference(1, 4, 0, 0) != share_difference(1, 4, 0, 0)  # nan: no runs on one side


def test_one_way_to_print_an_interval_and_a_count() -> None:
    assert interval_text(0.022, 0.2) == "2.2–20.0"
    assert interval_text(1.0, 1.0) == "100.0–100.0"  # printed as it is when it exists
    assert interval_text(None, None) == interval_text(float("nan"), 0.5) == "–"  # none: by construction only
    assert [counted(n, "insight") for n in (0, 1, 2, 1204)] == ["0 insights", "1 insight", "2 insights",
                                                                "1,204 insights"]

"""`in_threads`: every item answered once, results or exceptions handed back, work really overlapping, and an
interrupted caller starting nothing new."""

from __future__ import annotations

import threading
import time

import pytest

from failatlas.bench_core.runs.threads import in_threads
from failatlas.core.errors import ConfigError


def _square(n: int) -> int:
    if n == 3:
        raise ValueError("three")
    time.sleep(0.01 * (5 - n % 5))
    return n * n


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_every_item_is_answered_once_with_its_result_or_its_exception(workers: int) -> None:
    got = dict(in_threads(list(range(10)), _square, workers))
    assert sorted(got) == list(range(10))
    assert isinstance(got[3], ValueError) and str(got[3]) == "three"
    assert {k: v for k, v in got.items() if k != 3} == {n: n * n for n in range(10) if n != 3}


def test_one_worker_runs_in_the_callers_thread_and_two_overlap() -> None:
    seen: set[str] = set()
    list(in_threads([1, 2], lambda _n: seen.add(threading.current_thread().name), 1))
    assert seen == {threading.current_thread().name}

    barrier = threading.Barrier(2, timeout=5)  # both items must be running at once to pass the barrier
    results = dict(in_threads([1, 2], lambda n: (barrier.wait(), n)[1], 2))
    assert results == {1: 1, 2: 2}


def test_a_caller_that_stops_starts_no_new_item() -> None:
    started: list[int] = []

    def slow(n: int) -> int:
        started.append(n)
        time.sleep(0.2)
        return n

    results = in_threads(list(range(20)), slow, 2)
    next(results)
    results.close()  # what an exception in the caller's loop does (Ctrl-C included)
    time.sleep(0.5)
    assert len(started) <= 4  # the two running ones, and at most one more each before the stop was seen


def test_workers_below_one_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--workers"):
        list(in_threads([1], _square, 0))

"""Work beside the main UMAP: the 2-D map and the stability re-runs, in a second process.

A seeded UMAP runs on one core (umap-learn ignores the seed when it runs threads), and its compiled code holds
the GIL, so a second core stays idle through a clustering unless the independent fits (the 2-D map and each
stability re-run) run in another process. They are submitted before the main reduction starts and collected
after it; being seeded, they give exactly what they give in the main process (tested), so the result does not
depend on the number of workers. Below SIDE_MIN_N insights starting a process costs more than it saves.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import numpy as np

SIDE_MIN_N = 4096


class Later:
    """A future computed in this process when its result is first asked for (the one-worker case)."""

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self._fn, self._args, self._done, self._value = fn, args, False, None

    def result(self) -> Any:
        if not self._done:
            self._value, self._done = self._fn(*self._args), True
            self._args = ()
        return self._value


class SideWorker:
    """`submit(fn, *args)` runs `fn` in a second process (`workers` >= 2) or later in this one (`workers` 1).
    A context manager: leaving it waits for and stops the second process."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    @property
    def parallel(self) -> bool:
        return self.workers >= 2

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future | Later:
        if not self.parallel:
            return Later(fn, args)
        if self._pool is None:
            # spawn, not fork: the parent may hold OpenMP / torch threads that a forked child would inherit broken
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        return self._pool.submit(fn, *args)

    def __enter__(self) -> SideWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def default_workers(n: int) -> int:
    """2 when there are at least 2 CPUs for this process and SIDE_MIN_N insights, else 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return 2 if cpus >= 2 and n >= SIDE_MIN_N else 1


def fit_umap(X: np.ndarray, params: dict[str, Any]) -> np.ndarray:
    """A UMAP fit (in the side process): float32 coordinates."""
    from failatlas.cluster.components import make_reducer

    return np.asarray(make_reducer("umap", **params).fit_transform(X), dtype=np.float32)

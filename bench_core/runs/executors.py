"""Executors run `execute_run` somewhere and yield records back to the one process that writes the store.

- `local`: a pool of worker processes on this host; GPUs are leased per run from a `GpuAllocator` (a task that
  needs more GPUs than the host has runs with none when `RunConfig.run_without_gpus`; no GPU free within
  `gpu_wait_s` is the run's `infra_error`).
- `ray`: Ray tasks on a cluster (`pip install 'failatlas[ray]'`), scheduled by the task's GPU count; the GPU ids
  Ray grants are passed into the sandbox.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import time
from collections.abc import Iterator
from typing import Protocol

from failatlas.bench_core.runs.execute import RunConfig, execute_run, infra_failure
from failatlas.bench_core.runs.model import RunRecord, RunRequest
from failatlas.bench_core.runs.threads import reap_after_exit
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import ConfigError, MissingDependencyError

Work = list[tuple[RunRequest, TaskSpec]]
INTERRUPT_GRACE_S = 0.5  # after Ctrl-C, how long workers get to close their sandboxes before they are ended


class Executor(Protocol):
    def map_unordered(self, work: Work, config: RunConfig) -> Iterator[RunRecord]: ...
    def __enter__(self) -> Executor: ...
    def __exit__(self, *exc: object) -> None: ...


def _run_with_gpus(request: RunRequest, task: TaskSpec, config: RunConfig) -> RunRecord:
    """`execute_run` with the task's GPUs (overrides applied) leased for the run and visible in its sandbox."""
    gpus = config.overrides.apply(task).resources.gpus
    if gpus <= 0:
        return execute_run(request, task, config)
    from failatlas.bench_core.sandbox import GpuAllocator, GpuUnavailableError

    allocator = GpuAllocator()
    if gpus > len(allocator.gpu_ids) and config.run_without_gpus:
        return execute_run(request, task, config.model_copy(update={"gpu_ids": []}))
    try:
        lease = allocator.lease(gpus, owner=request.run_id, wait_s=config.gpu_wait_s)
    except GpuUnavailableError as exc:
        return infra_failure(request, task, config, exc.one_line())
    with lease:
        return execute_run(request, task, config.model_copy(update={"gpu_ids": list(lease.ids)}))


def _pool_run(request: RunRequest, task: TaskSpec, config: RunConfig) -> RunRecord:
    """`_run_with_gpus` in a pool worker, which ends at Ctrl-C (its run closed its sandbox on the way out)
    instead of taking the next queued run, as a pool worker otherwise would."""
    try:
        return _run_with_gpus(request, task, config)
    except KeyboardInterrupt:
        os._exit(130)


def host_gpus(executor: str) -> int | None:
    """How many GPUs runs on `executor` can lease: this host's for `local`; None for `ray`, which schedules runs
    by GPU count on its cluster itself."""
    if executor != "local":
        return None
    from failatlas.bench_core.sandbox import detect_gpus

    return len(detect_gpus())


class LocalExecutor:
    """Worker processes on this host (in-process when workers == 1, so a debugger and profiler see everything)."""

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ConfigError("--workers must be at least 1")
        self.workers = workers
        self._pool: cf.ProcessPoolExecutor | None = None
        self._sandbox: str | None = None

    def __enter__(self) -> LocalExecutor:
        if self.workers > 1:
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._pool is None:
            return
        if exc_type is None or not issubclass(exc_type, KeyboardInterrupt):
            self._pool.shutdown(wait=True, cancel_futures=True)
            return
        # Ctrl-C: the workers got it too, close their sandboxes and exit (`_pool_run`); the store holds only
        # finished runs (this process writes each in one transaction), so a worker still busy after the grace is
        # ended, and a detached process removes its sandbox, whose owner is then gone
        processes = list(getattr(self._pool, "_processes", {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        ended = False
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                ended = True
        if ended and self._sandbox is not None:
            reap_after_exit(self._sandbox)

    def map_unordered(self, work: Work, config: RunConfig) -> Iterator[RunRecord]:
        if self._pool is None:
            for request, task in work:
                yield _run_with_gpus(request, task, config)
            return
        self._sandbox = config.sandbox
        futures = [self._pool.submit(_pool_run, request, task, config) for request, task in work]
        for future in cf.as_completed(futures):
            yield future.result()


class RayExecutor:
    """Ray tasks: each run asks Ray for its task's GPUs and receives the ids Ray grants."""

    def __init__(self, workers: int = 0, address: str | None = None) -> None:
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise MissingDependencyError("ray", "ray") from exc
        self.address = address
        self.workers = workers

    def __enter__(self) -> RayExecutor:
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False)
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map_unordered(self, work: Work, config: RunConfig) -> Iterator[RunRecord]:
        import ray

        @ray.remote
        def _remote(request: RunRequest, task: TaskSpec, config: RunConfig) -> RunRecord:
            gpu_ids = [str(int(g)) for g in ray.get_gpu_ids()]
            return execute_run(request, task, config.model_copy(update={"gpu_ids": gpu_ids}))

        pending = [_remote.options(num_gpus=config.overrides.apply(task).resources.gpus, num_cpus=1)
                   .remote(request, task, config)
                   for request, task in work]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])


def create_executor(name: str, *, workers: int = 1) -> Executor:
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        return RayExecutor(workers)
    raise ConfigError(f"unknown executor '{name}'", hint="use 'local' or 'ray'")

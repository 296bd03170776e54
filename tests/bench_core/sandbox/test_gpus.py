"""GPU leasing across threads and real processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import GpuAllocator, GpuUnavailableError, SandboxSpec, detect_gpus


def _worker(state_dir: str, rounds: int, out: mp.Queue) -> None:
    alloc = GpuAllocator(["0", "1"], state_dir=state_dir)
    for _ in range(rounds):
        with alloc.lease(1, owner=f"pid{os.getpid()}", wait_s=30, poll_s=0.005) as lease:
            start = time.monotonic()
            time.sleep(0.01)
            out.put((lease.ids[0], start, time.monotonic()))


def _lease_and_die(state_dir: str) -> None:
    GpuAllocator(["0", "1"], state_dir=state_dir).lease(2)
    os._exit(0)


def test_never_double_leases_across_processes(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(str(tmp_path), 8, out)) for _ in range(4)]
    for w in workers:
        w.start()
    intervals = [out.get(timeout=60) for _ in range(4 * 8)]
    for w in workers:
        w.join(timeout=30)
        assert w.exitcode == 0
    for gpu in ("0", "1"):
        spans = sorted((s, e) for g, s, e in intervals if g == gpu)
        assert spans, f"GPU {gpu} was never leased"
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end, f"GPU {gpu} leased twice at once"


def test_not_enough_free_gpus_is_a_clear_error(tmp_path: Path) -> None:
    alloc = GpuAllocator(["0", "1"], state_dir=tmp_path)
    held = alloc.lease(2, owner="run-a")
    assert sorted(held.ids) == ["0", "1"] and held.cuda_visible_devices in ("0,1", "1,0")
    with pytest.raises(GpuUnavailableError, match="0 free"):
        alloc.lease(1, wait_s=0.3, poll_s=0.05)
    with pytest.raises(GpuUnavailableError, match="has 2"):
        alloc.lease(3)
    held.release()
    assert alloc.lease(1).ids == ["0"]


def test_waits_for_a_release(tmp_path: Path) -> None:
    import threading

    alloc = GpuAllocator(["7"], state_dir=tmp_path)
    first = alloc.lease(1)
    threading.Timer(0.3, first.release).start()
    start = time.monotonic()
    with alloc.lease(1, wait_s=10, poll_s=0.05) as second:
        assert second.ids == ["7"] and time.monotonic() - start >= 0.25


def test_leases_of_dead_processes_are_reclaimed(tmp_path: Path) -> None:
    proc = mp.get_context("fork").Process(target=_lease_and_die, args=(str(tmp_path),))
    proc.start()
    proc.join(timeout=30)
    alloc = GpuAllocator(["0", "1"], state_dir=tmp_path)
    assert sorted(alloc.lease(2).ids) == ["0", "1"]


def test_zero_gpus_and_detection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert GpuAllocator([], state_dir=tmp_path).lease(0).ids == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert detect_gpus() == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect_gpus() == []


def test_spec_refuses_all_gpus() -> None:
    with pytest.raises(ValueError, match="never 'all'"):
        SandboxSpec(gpu_ids=["all"])

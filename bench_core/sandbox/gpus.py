"""Leasing GPUs by device id, so several sandboxes share one host without sharing a GPU.

State lives in a folder shared by every process of the host (default /tmp/failatlas-gpus, or
$FAILATLAS_GPU_STATE): `state.json`, changed only under an exclusive `fcntl.flock` on `lock`. A lease whose
owner process has died is reclaimed, so a crashed runner does not hold GPUs forever.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from failatlas.bench_core.sandbox import procs
from failatlas.bench_core.sandbox.errors import GpuUnavailableError

DEFAULT_STATE_DIR = "/tmp/failatlas-gpus"


def detect_gpus() -> list[str]:
    """Host GPU ids: $CUDA_VISIBLE_DEVICES when set, else the indices `nvidia-smi -L` lists, else none."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        return [] if ids in (["-1"], ["NoDevFiles"]) else ids
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return re.findall(r"^GPU (\d+):", out, flags=re.MULTILINE)


class GpuLease:
    """GPU ids held by one run until `release()` (or the end of a `with` block)."""

    def __init__(self, allocator: GpuAllocator | None, ids: list[str], lease_id: str) -> None:
        self.allocator = allocator
        self.ids = ids
        self.lease_id = lease_id

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(self.ids)

    def release(self) -> None:
        if self.allocator is not None and self.ids:
            self.allocator._release(self.lease_id)
        self.allocator = None

    def __enter__(self) -> GpuLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"GpuLease(ids={self.ids!r}, lease_id={self.lease_id!r})"


class GpuAllocator:
    """Hands out GPU ids; safe across threads and processes of one host. Never gives one GPU to two leases."""

    def __init__(self, gpu_ids: Sequence[str] | None = None, *, state_dir: str | Path | None = None) -> None:
        self.gpu_ids = [str(g) for g in gpu_ids] if gpu_ids is not None else detect_gpus()
        self.state_dir = Path(state_dir or os.environ.get("FAILATLAS_GPU_STATE") or DEFAULT_STATE_DIR)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                path = self.state_dir / "state.json"
                state = json.loads(path.read_text()) if path.exists() and path.stat().st_size else {}
                leases = {gpu: held for gpu, held in state.get("leases", {}).items()
                          if procs.is_alive(held["pid"], held.get("start"))}
                state["leases"] = leases
                yield state
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(state, indent=1))
                tmp.replace(path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def in_use(self) -> dict[str, dict]:
        """GPU id -> who holds it (lease, pid, owner, since), live leases only."""
        with self._locked() as state:
            return dict(state["leases"])

    def free(self) -> list[str]:
        with self._locked() as state:
            return [g for g in self.gpu_ids if g not in state["leases"]]

    def lease(self, count: int, *, owner: str = "", wait_s: float = 0.0, poll_s: float = 0.5) -> GpuLease:
        """Lease `count` free GPUs, waiting up to `wait_s` seconds for them; GpuUnavailableError otherwise."""
        if count <= 0:
            return GpuLease(None, [], "")
        if count > len(self.gpu_ids):
            raise GpuUnavailableError(f"{count} GPU(s) asked for, but this host has {len(self.gpu_ids)}",
                                      hint="lower the task's GPU count or run it on a bigger host")
        deadline = time.monotonic() + wait_s
        pid = os.getpid()
        while True:
            with self._locked() as state:
                free = [g for g in self.gpu_ids if g not in state["leases"]]
                if len(free) >= count:
                    lease_id = uuid.uuid4().hex
                    held = {"lease": lease_id, "pid": pid, "start": procs.start_time(pid), "owner": owner,
                            "since": datetime.now(UTC).isoformat()}
                    for gpu in free[:count]:
                        state["leases"][gpu] = held
                    return GpuLease(self, free[:count], lease_id)
                busy = sorted(state["leases"])
            if time.monotonic() >= deadline:
                raise GpuUnavailableError(
                    f"{count} GPU(s) asked for, {len(free)} free (in use: {', '.join(busy) or 'none'})",
                    hint="wait for running tasks or allow a longer wait",
                )
            time.sleep(poll_s)

    def _release(self, lease_id: str) -> None:
        with self._locked() as state:
            state["leases"] = {g: h for g, h in state["leases"].items() if h["lease"] != lease_id}

"""The host-side view of a bwrap sandbox's processes: its PID namespace (from bwrap's info), the namespace's
members and their memory, the processes of a sandbox's own uid, and killing them (read from /proc, never from inside
the sandbox); the cores a sandbox is pinned to; removing its private folder."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from pathlib import Path

from failatlas.bench_core.sandbox import procs


def _pid_namespace(info: str) -> str | None:
    """The PID namespace of bwrap's child (the sandbox's init) from bwrap's info (`{"child-pid": N}`), None until
    bwrap has written it."""
    try:
        child = int(json.loads(info)["child-pid"])
        return os.readlink(f"/proc/{child}/ns/pid")
    except (ValueError, KeyError, TypeError, OSError):
        return None


def _namespace_members(namespace: str) -> list[tuple[int, int]]:
    """(pid, rss bytes) of the processes in the PID namespace `namespace`, zombies included (they count against the
    process limit until reaped)."""
    page = os.sysconf("SC_PAGE_SIZE")
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/pid") != namespace:
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().decode(errors="replace").rpartition(")")[2].split()
        except OSError:
            continue
        found.append((int(name), 0 if fields[0] == "Z" else int(fields[21]) * page))  # zombies hold a slot too
    return found


def _await_namespace_end(info: str, wait_s: float = 5.0) -> None:
    """Return once the command's PID namespace is gone: its init (bwrap's child, which dies with bwrap) is dead or
    a zombie, which the kernel lets it become only after every other process of the namespace has died. So what a
    command left running (background, setsid'ed, daemonised) is gone when `exec` returns, not moments later."""
    try:
        child = int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return
    until = time.monotonic() + wait_s  # bounded: the pid may meanwhile be another process's (never killed here)
    while procs.start_time(child) is not None and time.monotonic() < until:
        time.sleep(0.005)


def _uid_processes(uid: int) -> list[int]:
    """The processes whose real uid is `uid`, zombies included (they count against RLIMIT_NPROC until reaped)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                line = next((ln for ln in f if ln.startswith(b"Uid:")), b"")
        except OSError:
            continue
        if line.split()[1:2] == [str(uid).encode()]:
            found.append(int(name))
    return found


def _kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is `uid` (a sandbox's own, used by nothing else), until none is left."""
    for _ in range(10):
        found = _uid_processes(uid)
        if not found:
            return
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        time.sleep(0.05)


def _kill(bwrap_pid: int, namespace: str | None) -> None:
    """SIGKILL the namespace's processes and bwrap: once its init is gone the kernel kills whatever is left in the
    namespace, and bwrap's child dies with bwrap (--die-with-parent) when the namespace is not known yet."""
    for pid, _rss in _namespace_members(namespace) if namespace is not None else []:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    with contextlib.suppress(OSError):
        os.kill(bwrap_pid, 9)


_next_cpu = [0]


def _remove_tree(root: Path) -> None:
    """Remove `root`, also where the agent made folders unreadable or unwritable to its owner."""
    def fix(_func, path, _exc) -> None:  # noqa: ANN001
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    shutil.rmtree(root, onerror=fix)


def _pick_cpus(cpus: float) -> set[int]:
    """ceil(cpus) of the cores this process may use, taken in turn so that sandboxes spread over the host."""
    allowed = sorted(os.sched_getaffinity(0))
    want = min(len(allowed), max(1, math.ceil(cpus)))
    if want == len(allowed):
        return set()
    first = _next_cpu[0]
    _next_cpu[0] = (first + want) % len(allowed)
    return {allowed[(first + i) % len(allowed)] for i in range(want)}

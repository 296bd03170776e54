"""Host process facts from /proc: liveness with start time (PID reuse safe), sessions, memory, markers."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass

_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    sid: int
    rss_bytes: int


def start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` in clock ticks, None when no such process runs (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode(errors="replace").rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def is_alive(pid: int, started: str | None = None) -> bool:
    """Whether `pid` runs and, when `started` is given, is still the same process."""
    now = start_time(pid)
    if now is None:
        return False
    return started is None or started == now


def _pids() -> Iterator[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def session_processes(sid: int) -> list[ProcInfo]:
    """Live processes of session `sid` (zombies excluded)."""
    found = []
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().decode(errors="replace").rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] == "Z" or int(fields[3]) != sid:
            continue
        found.append(ProcInfo(pid=pid, sid=sid, rss_bytes=int(fields[21]) * _PAGE))
    return found


def marked_processes(marker: bytes) -> list[int]:
    """Processes whose environment holds the exact entry `marker` (readable only for our own processes)."""
    found = []
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


def kill_tree(sid: int | None, marker: bytes, rounds: int = 10) -> None:
    """SIGKILL the session `sid` and every process carrying `marker`, until none is left (forks included).
    `sid` None: the command's session is not known (Ctrl-C while it was being started); `marker` finds it."""
    if sid is None or sid <= 1:  # never killpg(0) (our own group) nor a negative or init's group
        for _ in range(rounds):
            targets = marked_processes(marker)
            if not targets:
                return
            for pid in targets:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        return
    # The session first, before any scan of /proc: a scan reads every process's files, which on a busy machine
    # takes longer than Ctrl-C's grace (the runner ends a worker 0.5 s after the signal, and its agent's commands
    # outlived it); the scans then find what left the session (setsid) and what forked meanwhile.
    with contextlib.suppress(OSError):
        os.killpg(sid, signal.SIGKILL)
    for _ in range(rounds):
        targets = {p.pid for p in session_processes(sid)} | set(marked_processes(marker))
        if not targets:
            return
        with contextlib.suppress(OSError):
            os.killpg(sid, signal.SIGKILL)
        for pid in targets:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

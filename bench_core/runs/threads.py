"""Work in threads of this process, results handed back to the caller's thread in the order they finish: for
work whose time is spent waiting on sandboxes (`bench score`'s re-runs and hidden tests), so the one process that
writes the store keeps writing it alone.

One worker runs everything in the caller's thread (a debugger and a profiler see it all; Ctrl-C stops it where
it is). With more, the threads are daemons. On Ctrl-C (or any exception in the caller) no new item starts, each
busy thread gets KeyboardInterrupt raised in it too (as the caller's thread did, so the sandbox code's own Ctrl-C
handling kills the commands it started), the caller waits for them at most STOP_WAIT_S, and its exception
propagates; sandboxes still left are removed by a detached process once this one has ended (their owner is then
gone). What was not handed back was not written, so a later call does it again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from failatlas.core.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")
STOP_WAIT_S = 1.5  # how long an interrupted caller waits for its busy threads


def in_threads(items: Sequence[T], work: Callable[[T], R], workers: int,
               sandbox_kinds: Sequence[str] = ()) -> Iterator[tuple[T, R | Exception]]:
    """(item, its result or the Exception it raised), each as soon as it is done; `workers` at a time.
    `sandbox_kinds`: the kinds of sandbox the work starts, reaped after an interrupted call (module docstring)."""
    if workers < 1:
        raise ConfigError("--workers must be at least 1")
    if workers == 1 or len(items) <= 1:
        for item in items:
            try:
                result: R | Exception = work(item)
            except Exception as exc:  # noqa: BLE001 - handed to the caller, who records it
                result = exc
            yield item, result
        return
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(items)):
        todo.put(index)
    done: queue.SimpleQueue[tuple[int, R | Exception]] = queue.SimpleQueue()
    stop = threading.Event()

    def worker() -> None:
        with contextlib.suppress(KeyboardInterrupt):  # `_interrupt` may land anywhere in here
            while not stop.is_set():
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    done.put((index, work(items[index])))
                except Exception as exc:  # noqa: BLE001
                    done.put((index, exc))
                except KeyboardInterrupt:
                    return
                except BaseException as exc:  # noqa: BLE001 - e.g. SystemExit in a thread: still an answer
                    done.put((index, RuntimeError(f"{type(exc).__name__}: {exc}")))

    threads = [threading.Thread(target=worker, daemon=True, name=f"failatlas-work-{n}")
               for n in range(min(workers, len(items)))]
    for thread in threads:
        thread.start()
    handed = 0
    try:
        while handed < len(items):
            try:
                index, result = done.get(timeout=0.2)  # a timed wait: Ctrl-C reaches this thread at once
            except queue.Empty:
                continue
            handed += 1
            yield items[index], result
    finally:
        stop.set()
        if handed < len(items):
            _interrupt(threads)
            for kind in sandbox_kinds:
                reap_after_exit(kind, wait_for=os.getpid())


def _interrupt(threads: list[threading.Thread]) -> None:
    """Raise KeyboardInterrupt in each live thread (at its next Python instruction) and wait for them, together at
    most STOP_WAIT_S."""
    for thread in threads:
        if thread.is_alive() and thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                       ctypes.py_object(KeyboardInterrupt))
    until = time.monotonic() + STOP_WAIT_S
    for thread in threads:
        thread.join(max(0.0, until - time.monotonic()))


def reap_after_exit(sandbox: str, wait_for: int | None = None) -> None:
    """In a detached process: wait (at most a minute) for process `wait_for` (None: none) to end, then remove the
    sandboxes of kind `sandbox` whose owner is gone."""
    code = ("import contextlib, os, time\n"
            f"for _ in range(600 if {wait_for!r} else 0):\n"
            f"    try:\n        os.kill({wait_for!r}, 0)\n    except OSError:\n        break\n"
            "    time.sleep(0.1)\n"
            "from failatlas.bench_core.sandbox import sandbox_kind\n"
            f"with contextlib.suppress(Exception):\n    sandbox_kind({sandbox!r}).clean_orphans()\n")
    with contextlib.suppress(OSError):
        subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)

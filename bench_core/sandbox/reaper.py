"""The local backend's per-command reaper: `python3 -I -S reaper.py ARGV...` runs ARGV as its child and, when it
ends, kills every process the command left, then exits as the command did.

It makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so whatever the command started and abandoned (a
background job, a daemon that double-forked and called setsid, one that cleared its environment and so carries no
marker) is re-parented to it rather than to init, and it kills its children until it has none: nothing the command
started outlives it. Standard library only; it runs before any of the command's code.
"""

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def _children(me: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().decode(errors="replace").rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.append(int(name))
    return found


def _reap_all(me: int) -> None:
    """SIGKILL and reap children until none is left (each round re-parents the grandchildren of those killed)."""
    while True:
        for pid in _children(me):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                return


def main(argv: list[str]) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    me = os.getpid()
    state = {"child": 0, "stop": False}

    def stop(_number, _frame) -> None:  # the harness ends the command (its deadline, a limit): all of it
        state["stop"] = True
        if state["child"]:
            with contextlib.suppress(OSError):
                os.kill(state["child"], signal.SIGKILL)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    child = os.fork()
    if child == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"{argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    state["child"] = child
    if state["stop"]:
        stop(None, None)
    _, status = os.waitpid(child, 0)
    _reap_all(me)
    if os.WIFSIGNALED(status):
        with contextlib.suppress(OSError, ValueError):  # SIGKILL keeps its default anyway
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(me, os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Starting a hidden-test judge: forked by a server that has pytest imported (`judge_fork.py`), or, where no
server can run, a fresh `python3 -I -B` process as before. Either way the caller gets a process handle with
`poll`, `wait`, `kill` and `returncode`, as `subprocess.Popen` has.

One server per harness process, Python and judge environment (at most MAX_SERVERS live), started on the first
judge and ended with the harness (it reads EOF on its socket and kills the judges it forked). A judge it forks gets
exactly the descriptors it is handed and the judge's address-space limit, in the harness's process group
(judge_fork.py says the rest); the harness holds a pidfd for each, so a kill never reaches a reused pid. Where a
server cannot start (no pytest for that Python) or has died, judges start as fresh processes (a dead one is started
again for the next judge), and a judge already forked is still watched through its pidfd.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import select
import signal
import socket
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

SERVER = Path(__file__).resolve().parent / "judge_fork.py"
START_TIMEOUT_S = 60.0
UNKNOWN_EXIT = -1  # a judge whose server died before telling its exit status
MAX_SERVERS = 4  # live fork servers per harness process, at most (idle ones beyond are ended)
STATUS_WAIT_S = 2.0  # how long an ended judge's status may take to arrive from its server


class JudgeStartError(Exception):
    """The fork server took a judge's request and then ended or went silent: a judge may run with its descriptors,
    so no other may start on them."""


_ENDED = object()  # the server's socket reached its end


class ForkedJudge:
    """A judge forked by the server: the part of `subprocess.Popen` that `relay.run_judge` uses. Its end is seen
    through its pidfd (readable once it exits, whether or not its server still runs); its exit status is the
    server's word, UNKNOWN_EXIT where that does not come."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self.returncode: int | None = None
        self._exited = threading.Event()
        self._lock = threading.Lock()

    def _set_exit(self, code: int) -> None:
        with self._lock:
            if self.returncode is None:
                self.returncode = code
            self._exited.set()

    def _gone(self, timeout: float | None) -> bool:
        """Whether the process has ended, waiting at most `timeout` seconds (None: until it does)."""
        with self._lock:
            fd = self._pidfd
        if fd < 0 or self._exited.is_set():
            return True
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000))))

    def _ended(self) -> None:
        self._exited.wait(STATUS_WAIT_S)  # its status, from the server that reaps it
        self._set_exit(UNKNOWN_EXIT)  # kept only where none came

    def poll(self) -> int | None:
        if not self._exited.is_set() and self._gone(0):
            self._ended()
        return self.returncode if self._exited.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.is_set():
            if not self._gone(timeout):
                raise subprocess.TimeoutExpired("hidden-test judge", timeout or 0)
            self._ended()
        self.close()
        return self.returncode if self.returncode is not None else UNKNOWN_EXIT

    def kill(self) -> None:
        with self._lock:
            if self._pidfd >= 0 and not self._exited.is_set():
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def close(self) -> None:
        with self._lock:
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


class JudgeServer:
    """The harness's end of one fork server (module docstring). Raises OSError from `__init__` when it cannot
    start and from `start` when it is gone."""

    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([python, "-I", "-B", str(SERVER), str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                                         env=dict(env))
        except BaseException:
            self._sock.close()
            raise
        finally:
            theirs.close()
        self._replies: queue.SimpleQueue = queue.SimpleQueue()
        self._judges: dict[int, ForkedJudge] = {}
        self._lock = threading.Lock()  # one request at a time
        self._table = threading.Lock()  # _judges, alive
        self.alive = True
        self._sock.settimeout(START_TIMEOUT_S)
        try:
            ready = json.loads(self._sock.recv(1 << 16) or b"{}").get("ready") is True
        except (OSError, ValueError, AttributeError):
            ready = False
        if not ready:
            self.close()
            raise OSError(f"the judges' fork server did not start with {python}")
        self._sock.settimeout(None)
        threading.Thread(target=self._read, daemon=True, name="failatlas-judge-server").start()

    def _read(self) -> None:
        try:
            while True:
                data, fds, _flags, _addr = socket.recv_fds(self._sock, 1 << 16, 1)
                if not data:
                    break
                message = json.loads(data)
                if "pid" in message and fds:
                    os.set_inheritable(fds[0], False)
                    judge = ForkedJudge(int(message["pid"]), fds[0])
                    with self._table:
                        self._judges[judge.pid] = judge
                    self._replies.put(judge)
                elif "exit" in message:  # the server tells a judge's exit only after its reply
                    with self._table:
                        judge = self._judges.pop(int(message["exit"]), None)
                    if judge is not None:
                        judge._set_exit(int(message["code"]))
                else:
                    for fd in fds:
                        os.close(fd)
                    self._replies.put(OSError(str(message.get("error", "the fork server refused"))))
        except (OSError, ValueError):
            pass
        with self._table:
            self.alive = False
            self._judges.clear()
        self._replies.put(_ENDED)

    def start(self, script: Path, args: Sequence[str], fds: Sequence[int], *, cwd: Path, memory: int,
              path_first: Sequence[Path] = ()) -> ForkedJudge:
        """Fork a judge running `script` as `__main__` with argv `[script, out fd, in fd, *args]`; `fds`: its
        channel out, its channel in and its log (stdout and stderr). OSError where no judge was started (the
        server is gone, or refused), so a fresh process may take its place; JudgeStartError where the server
        ended or went silent after the request reached it, and a judge it forked may hold the descriptors.
        `path_first`: the folders the judge puts first on its path (judge_fork.py's `_shadowed`)."""
        request = json.dumps({"script": str(script), "args": list(args), "cwd": str(cwd), "memory": int(memory),
                              "path_first": [str(p) for p in path_first]})
        with self._lock:
            if not self.alive:
                raise OSError("the judges' fork server ended")
            socket.send_fds(self._sock, [request.encode()], list(fds))
            try:
                reply = self._replies.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                self.close()
                raise JudgeStartError(f"the judges' fork server did not answer within {START_TIMEOUT_S:.0f} s") \
                    from None
            except BaseException:  # interrupted between the request and its reply: replies would pair with the
                self.close()  # wrong requests from here on; the server kills what it forked as it ends
                raise
        if reply is _ENDED:
            raise JudgeStartError("the judges' fork server ended before it said whether it started the judge")
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def close(self) -> None:
        """End the server (it reads EOF and exits; killed if it has not within 5 s) and reap it. A `start` that got
        this server before it was ended fails with OSError before sending (a closed socket), so its judge starts as a
        fresh process."""
        with self._table:
            self.alive = False
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # EOF for the server, and wakes the reader blocked on it
        with contextlib.suppress(OSError):
            self._sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_SERVERS: dict[tuple, JudgeServer | None] = {}  # None: it could not start, or died; fresh processes instead
_SERVERS_LOCK = threading.Lock()


@atexit.register
def _close_servers() -> None:
    """At the harness's exit: each server ended and reaped by it, so none outlives it and their CPU time (and
    their judges') is counted in the harness's own, as a fresh judge's was."""
    with _SERVERS_LOCK:
        servers = [s for s in _SERVERS.values() if s is not None]
        _SERVERS.clear()
    for server in servers:
        with contextlib.suppress(Exception):
            server.close()


def _server(python: str, env: Mapping[str, str]) -> JudgeServer | None:
    key = (python, tuple(sorted(env.items())))
    with _SERVERS_LOCK:
        if key in _SERVERS:
            found = _SERVERS[key]
            if found is None or found.alive:
                return found
        _retire_idle()
        try:
            found = JudgeServer(python, env)
        except OSError:
            found = None
        _SERVERS[key] = found
        return found


def _retire_idle() -> None:
    """Hold _SERVERS_LOCK. Past MAX_SERVERS live servers (a judge environment that changes from call to call, e.g.
    a HOME per test), end the oldest of those with no request in flight and no judge running."""
    live = [(key, server) for key, server in _SERVERS.items() if server is not None and server.alive]
    for key, server in live[:max(0, len(live) - MAX_SERVERS + 1)]:
        if not server._lock.acquire(blocking=False):
            continue
        try:
            with server._table:
                busy = bool(server._judges)
            if not busy:
                del _SERVERS[key]
                server.close()
        finally:
            server._lock.release()


def start_judge(python: str, script: Path, args: Sequence[str], fds: Sequence[int], *, log: int, cwd: Path,
                env: Mapping[str, str], memory: int, fork: bool = True,
                path_first: Sequence[Path] = ()) -> ForkedJudge | subprocess.Popen:
    """Start `python -I -B script <out fd> <in fd> *args` (`fds`: out, in) with its stdout and stderr on `log`,
    in `cwd`, with `env` and an address-space limit of `memory` bytes: forked by the server when `fork` and one
    runs, else as a fresh process. `path_first`: the folders the script puts first on its path."""
    out_fd, in_fd = fds
    server = _server(python, env) if fork else None
    if server is not None:
        try:
            return server.start(script, args, (out_fd, in_fd, log), cwd=cwd, memory=memory, path_first=path_first)
        except OSError:
            pass  # no judge was started: this one starts as a fresh process (JudgeStartError goes to the caller)

    def limit() -> None:  # pragma: no cover - runs in the child before exec
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.Popen([python, "-I", "-B", str(script), str(out_fd), str(in_fd), *args],
                            pass_fds=(out_fd, in_fd), stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, cwd=cwd, env=dict(env), preexec_fn=limit)

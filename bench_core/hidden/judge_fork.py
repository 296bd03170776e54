"""The hidden-test judges' fork server, run as `python3 -I -B judge_fork.py <socket fd>` by `judge_start.py`:
one process per harness (and judge environment) that imports pytest, its default plugins and numpy (where the
environment has it) once, then forks a judge for each request instead of the harness starting a fresh interpreter
per judge (a judge spends most of its CPU importing and configuring pytest, and the tests importing numpy).

The server only imports, forks and reaps: each judge is a fresh fork of that unchanged state. A fork gets the
descriptors it was handed and no other (the server's socket closed), the judge's address-space limit, a fresh
interpreter's signal handling, `random` and `numpy.random` states of its own, and `failatlas_judge.py` run as
`__main__` as the command line would (`-I`: neither the script's folder nor the user's site on the path). The
judge puts its own folder and the pristine repository first on its path; the modules imported here that a module
of those folders would have shadowed in a fresh judge are dropped before it runs, so it imports theirs
(`_shadowed`). It stays in the harness's process group, so a Ctrl-C at the terminal reaches it as before. What a
fork cannot give afresh: the str hash secret and the memory layout are the server's, shared by its judges (each
fresh judge had its own).

Requests arrive on a SOCK_SEQPACKET socket as one JSON message with three descriptors (the judge's channel out and
in, its log); the reply carries the judge's pid and a pidfd, so the harness can kill it without racing pid reuse;
the judge's exit status follows as a message of its own once it is reaped. When the harness's end closes, the
server kills the judges it has not reaped and exits: none outlives the harness. Only the standard library,
pytest and numpy (where present) are used here.
"""

import sys

_AT_START = frozenset(sys.modules)  # what a fresh `python3 -I -B` holds before its script imports anything

import contextlib  # noqa: E402
import importlib  # noqa: E402
import importlib.machinery  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import runpy  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import traceback  # noqa: E402

READY = b'{"ready": true}'


def _shadowed(folders: list) -> list:
    """The modules already imported here that a judge would not have got: those whose top-level name a regular
    module or package of `folders` (the judge's own folder and the pristine repository, first on its path) holds. A
    fresh judge, importing after those folders went first, would have imported theirs."""
    suffixes = tuple(importlib.machinery.all_suffixes())
    names = set()
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(suffixes):
                names.add(entry.split(".", 1)[0])
            elif os.path.isfile(os.path.join(folder, entry, "__init__.py")):
                names.add(entry)
    names -= set(sys.builtin_module_names)  # found before any folder of the path
    names -= {m.split(".", 1)[0] for m in _AT_START}  # a fresh judge holds these too, whatever its path says
    return [m for m in sys.modules if m.split(".", 1)[0] in names]


def _child(sock: socket.socket, request: dict, fds: list) -> None:
    """The judge, in the forked process: never returns. Its signals are a fresh interpreter's (SIGINT raises
    KeyboardInterrupt, SIGPIPE ignored); it stays in the harness's process group, so a Ctrl-C at the terminal
    reaches it as it reached a fresh judge."""
    code = 70
    try:
        signal.set_wakeup_fd(-1)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        sock.close()
        out_fd, in_fd, log_fd = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        try:
            keep = {0, 1, 2, out_fd, in_fd}
            for name in os.listdir("/proc/self/fd"):
                if int(name) not in keep:
                    with contextlib.suppress(OSError):
                        os.close(int(name))
            limit = int(request["memory"])
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            os.chdir(request["cwd"])
            for name in _shadowed(request.get("path_first", [])):
                del sys.modules[name]
            if "random" in sys.modules:  # a state of its own, as a fresh interpreter's, not the server's copy
                sys.modules["random"].seed()
            if "numpy.random" in sys.modules:  # numpy's global generator too
                sys.modules["numpy.random"].seed()
            script = request["script"]
            sys.argv = [script, str(out_fd), str(in_fd), *request["args"]]
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:  # as the interpreter ends on it
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - the judge's crash, told in its log as the interpreter would
            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main(fd: int) -> int:
    import pytest  # noqa: F401 - the import every judge would otherwise pay for
    from _pytest.config import default_plugins

    for name in default_plugins:
        with contextlib.suppress(ImportError):
            importlib.import_module(f"_pytest.{name}")
    with contextlib.suppress(ImportError):  # what the hidden tests and the replay's comparison import (where installed)
        import numpy  # noqa: F401
    sock = socket.socket(fileno=fd)
    children: set = set()  # forked and not reaped yet: their pids cannot be reused, so a kill reaches them

    def reap(_signum=None, _frame=None) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            with contextlib.suppress(OSError):
                sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())

    # a SIGCHLD that lands just before the wait for the next request still wakes it, through this pipe
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness's Ctrl-C is the harness's to handle
    sock.send(READY)
    try:
        while True:
            readable, _, _ = select.select([sock, wake_r], [], [])
            if wake_r in readable:
                os.read(wake_r, 4096)
                reap()
            if sock not in readable:
                continue
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 3)
            except OSError:
                return 0
            if not data:
                return 0  # the harness is gone
            _serve(sock, json.loads(data), fds, children)
    finally:  # no judge outlives the harness that asked for it (pids not reaped yet: no reuse)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
        for pid in list(children):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _serve(sock: socket.socket, request: dict, fds: list, children: set) -> None:
    """Fork the judge of `request`; reply with its pid and a pidfd, or with why none runs."""
    if len(fds) != 3:
        for fd_ in fds:
            os.close(fd_)
        sock.send(json.dumps({"error": f"{len(fds)} descriptors, not 3"}).encode())
        return
    # no judge is reaped before the harness has its pidfd, and no exit is told before its reply
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    pid = 0
    try:
        pid = os.fork()
        if pid == 0:
            _child(sock, request, fds)
        children.add(pid)
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
        finally:
            os.close(pidfd)
    except OSError as exc:
        if pid:  # forked, but the harness cannot hold it: it never runs unwatched (its exit is not told)
            os.kill(pid, signal.SIGKILL)
            children.discard(pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        sock.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
    finally:
        for fd_ in fds:
            os.close(fd_)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))

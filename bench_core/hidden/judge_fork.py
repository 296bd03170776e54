"""The hidden-test judges' fork server, run as `python3 -I -B judge_fork.py <socket fd>` by `judge_start.py`:
one process per harness (and judge environment) that imports pytest and its default plugins once, then forks a
judge for each request instead of the harness starting a fresh interpreter per judge (a judge spends most of its
CPU importing and configuring pytest: about 0.35 of its 0.55 s here).

Nothing of a judge outlives it in the server: the server only imports, forks and reaps; each judge is a fresh fork
of that unchanged state, with the descriptors it was handed and no other (the server's socket closed), its own
session, the judge's address-space limit, and `failatlas_judge.py` run as `__main__` exactly as the command line
would (`-I`: neither the script's folder nor the user's site on the path; the judge puts its own folder and the
pristine repository first). Requests arrive on a SOCK_SEQPACKET socket as one JSON message with three descriptors
(the judge's channel out and in, its log); the reply carries the judge's pid and a pidfd, so the harness can kill
it without racing pid reuse; the judge's exit status follows as a message of its own once it is reaped. Only the
standard library and pytest are used here.
"""

import contextlib
import importlib
import json
import os
import resource
import runpy
import signal
import socket
import sys
import traceback

READY = b'{"ready": true}'


def _child(sock: socket.socket, request: dict, fds: list) -> None:
    """The judge, in the forked process: never returns."""
    code = 70
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        sock.close()
        os.setsid()
        out_fd, in_fd, log_fd = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        keep = {0, 1, 2, out_fd, in_fd}
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in keep:
                with contextlib.suppress(OSError):
                    os.close(int(name))
        os.set_inheritable(out_fd, True)
        os.set_inheritable(in_fd, True)
        limit = int(request["memory"])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.chdir(request["cwd"])
        if "random" in sys.modules:  # a state of its own, as a fresh interpreter's, not the server's copy
            sys.modules["random"].seed()
        script = request["script"]
        sys.argv = [script, str(out_fd), str(in_fd), *request["args"]]
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
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
    sock = socket.socket(fileno=fd)

    def reap(_signum=None, _frame=None) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            with contextlib.suppress(OSError):
                sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())

    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness's Ctrl-C is the harness's to handle
    sock.send(READY)
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 3)
        except OSError:
            return 0
        if not data:
            return 0  # the harness is gone
        request = json.loads(data)
        if len(fds) != 3:
            for fd_ in fds:
                os.close(fd_)
            sock.send(json.dumps({"error": f"{len(fds)} descriptors, not 3"}).encode())
            continue
        # no judge is reaped before the harness has its pidfd, and no exit is told before its reply
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
        pid = 0
        try:
            pid = os.fork()
            if pid == 0:
                _child(sock, request, fds)
            pidfd = os.pidfd_open(pid)
            try:
                socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
            finally:
                os.close(pidfd)
        except OSError as exc:
            if pid:  # forked, but the harness cannot hold it: it never runs unwatched
                os.kill(pid, signal.SIGKILL)
            sock.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        finally:
            for fd_ in fds:
                os.close(fd_)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))

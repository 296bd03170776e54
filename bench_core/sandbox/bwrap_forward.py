"""The forwarder inside a bwrap sandbox under `registries`: listens on 127.0.0.1:PORT of the sandbox's own network
namespace and relays each connection to the host-side egress proxy's unix socket, bound into the sandbox.

Standard library only: the sandbox's command wrapper runs it as `python3 bwrap_forward.py SOCKET PORT`. It binds,
then detaches (a double fork, so it is a child of the namespace's init, not of the agent's command) and exits 0, so
the command starts once the port listens. It dies with the sandbox's PID namespace; an agent that kills it only
loses its own way to the registries. It decides nothing: the proxy behind the socket allows or refuses.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy one direction; at its end pass the end on (a half close), on an error end both directions."""
    how = socket.SHUT_WR
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        how = socket.SHUT_RDWR
    with contextlib.suppress(OSError):
        dst.shutdown(how)
    if how == socket.SHUT_RDWR:
        with contextlib.suppress(OSError):
            src.shutdown(how)


def _serve(listener: socket.socket, path: str) -> None:
    threading.stack_size(256 * 1024)
    while True:  # a flood of connections (out of threads or files) drops the ones it cannot serve, never the loop
        try:
            client, _ = listener.accept()
        except OSError:
            time.sleep(0.05)
            continue
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()
        except (OSError, RuntimeError):
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()


def main(argv: list[str]) -> int:
    path, port = argv[0], int(argv[1])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork():
        return 0  # the wrapper's child: its command may start, the port listens
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)  # holds none of the command's pipes open
    _serve(listener, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The harness's end of a Docker sandbox's command server (`command_server.py`): one attached root `exec` per
container that starts every later command of the sandbox as a fork inside it.

A `docker exec` costs the host about 55 ms of CPU (dockerd, containerd, runc) and a `failatlas demo` made 722 of
them (benchmarks/RESULTS.md); a command through the server costs about 4 ms. The server starts each process as
`docker exec` would (its docstring says how), so `DockerCommands` keeps every rule of its own (the deadline under
`timeout -s KILL`, the marker, the reap, the counters) and only the transport changes. The server must be root to
drop to the sandbox user, so a container that has one keeps SETUID and SETGID for root (as a traced container
already did); the sandbox user, with no new privileges, never has them.

Where the server cannot start (no `python3` 3.9 or later in the image, or `$FAILATLAS_DOCKER_COMMAND_SERVER` is
`0`), or once it has ended (the container restarted), the sandbox uses `docker exec` as before. A command whose
server ended under it is a broken stream (`ServerGone`), which the sandbox treats as Docker's own broken streams: no
verdict rests on output that may be incomplete.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import struct
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from failatlas.bench_core.sandbox import docker_stream
from failatlas.bench_core.sandbox.command_server import SERVER, SOURCE_VERSION
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.output import CappedBuffer

SWITCH = "FAILATLAS_DOCKER_COMMAND_SERVER"
READY_S = 20.0  # how long the server may take to start (a loaded host, a cold page cache)
EXIT_WAIT_S = 5.0  # how long an ended stream may precede its exit code (never: the code is the stream's last frame)
_HEADER = struct.Struct(">cII")
ROOT_USERS = frozenset({"root", "0"})


def enabled(spec_user: str) -> bool:
    """Whether a sandbox of this user gets a server: not switched off, and a user other than root (a root user's
    commands would gain the server's capabilities)."""
    return os.environ.get(SWITCH, "1") != "0" and spec_user.partition(":")[0] not in ROOT_USERS


class ServerGone(docker_stream.ExecStreamBroken):
    """The command server ended (or could not be written to) before the command's end: its output may be
    incomplete and its exit code is unknown."""


class ServerCommand:
    """One command started by the server: its output as (stdout, stderr) chunks and, once it ended, its exit code."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.code: int | None = None
        self.broken: ServerGone | None = None
        self.ended = threading.Event()
        self._chunks: queue.SimpleQueue[tuple[bytes | None, bytes | None] | None] = queue.SimpleQueue()

    def chunks(self) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Its output until it ended; raises ServerGone when the server ended first."""
        while True:
            item = self._chunks.get()
            if item is None:
                if self.broken is not None:
                    raise self.broken
                return
            yield item

    def exit_code(self, wait: float = EXIT_WAIT_S) -> int | None:
        """Its exit code (128 + the signal that killed it), or None when it is unknown after `wait` seconds."""
        self.ended.wait(wait)
        return self.code

    def _end(self, code: int | None, broken: ServerGone | None = None) -> None:
        if self.ended.is_set():
            return
        self.code, self.broken = code, broken
        self.ended.set()
        self._chunks.put(None)


class CommandServer:
    """A running server in one container; `spawn` starts a command through it."""

    def __init__(self, sock: Any, chunks: Iterator[tuple[bytes | None, bytes | None]]) -> None:
        self._sock = sock
        self._numbers = itertools.count(1)
        self._commands: dict[int, ServerCommand] = {}
        self._lock = threading.Lock()  # the socket's writes and `_commands`
        self._ready = threading.Event()
        self.version: int | None = None
        self.stderr = CappedBuffer(16 * 1024)  # the server's own complaints, for a diagnosis
        self.gone: str | None = None  # why it ended, once it has
        self._thread = threading.Thread(target=self._read, args=(chunks,), daemon=True,
                                        name="failatlas-sandbox-server")
        self._thread.start()

    @classmethod
    def start(cls, api: Any, container_id: str, *, base_env: Mapping[str, str], path: str) -> CommandServer | None:
        """Start the server in the container (as root, `python3` looked up on `path`, folders only root writes);
        None when it does not come up within READY_S (no usable `python3`, or the container is failing)."""
        import docker

        argv = ["python3", "-I", "-S", "-c", SERVER, json.dumps(dict(base_env))]
        try:
            exec_id = api.exec_create(container_id, argv, user="0:0", stdin=True, environment={"PATH": path})["Id"]
            sock, chunks = docker_stream.exec_attached(api, exec_id)
        except (docker.errors.DockerException, OSError, SandboxError):
            return None
        server = cls(sock, chunks)
        if not server._ready.wait(READY_S) or server.version != SOURCE_VERSION:
            server.close()
            return None
        return server

    @property
    def alive(self) -> bool:
        return self.gone is None

    def spawn(self, argv: list[str], *, user: str, env: Mapping[str, str], cwd: str | None) -> ServerCommand:
        """Start `argv` as `user` with `env` (over the container's) in `cwd` (None: the container's working folder).
        Raises ServerGone when the server has ended or cannot be written to."""
        body = json.dumps({"argv": list(argv), "user": user, "env": dict(env), "cwd": cwd}).encode()
        with self._lock:
            if self.gone is not None:
                raise ServerGone(f"the sandbox's command server ended: {self.gone}")
            command = ServerCommand(next(self._numbers))
            self._commands[command.number] = command
            try:
                self._sock.sendall(_HEADER.pack(b"S", command.number, len(body)) + body)
            except OSError as exc:
                del self._commands[command.number]
                raise ServerGone(f"the sandbox's command server cannot be written to: {exc}") from exc
        return command

    def close(self) -> None:
        """End the server (its stdin closes) and stop reading it; commands still running are ServerGone."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(2)
        with contextlib.suppress(OSError):
            self._sock.close()
        self._thread.join(5.0)

    def _read(self, chunks: Iterator[tuple[bytes | None, bytes | None]]) -> None:
        buffer = bytearray()
        why = "its stream closed"
        try:
            for out, err in chunks:
                if err:
                    self.stderr.write(err)
                if not out:
                    continue
                buffer += out
                while len(buffer) >= _HEADER.size:
                    kind, number, size = _HEADER.unpack_from(buffer)
                    if len(buffer) < _HEADER.size + size:
                        break
                    data = bytes(buffer[_HEADER.size:_HEADER.size + size])
                    del buffer[:_HEADER.size + size]
                    self._dispatch(kind, number, data)
        except Exception as exc:  # noqa: BLE001 - any end of the stream ends the server for the harness
            why = f"{type(exc).__name__}: {exc}"
        finally:
            tail = self.stderr.text().strip()
            self._end_all(why + (f"; it printed: {tail[-300:]}" if tail else ""))

    def _dispatch(self, kind: bytes, number: int, data: bytes) -> None:
        if kind == b"R":
            self.version = json.loads(data).get("version")
            self._ready.set()
            return
        with self._lock:
            command = self._commands.get(number)
            if command is not None and kind == b"X":
                del self._commands[number]
        if command is None:
            return
        if kind == b"O":
            command._chunks.put((data, None))
        elif kind == b"E":
            command._chunks.put((None, data))
        elif kind == b"X":
            command._end(int(json.loads(data)["code"]))

    def _end_all(self, why: str) -> None:
        with self._lock:
            self.gone = why
            pending, self._commands = list(self._commands.values()), {}
        self._ready.set()
        for command in pending:
            command._end(None, ServerGone(f"the sandbox's command server ended before the command did: {why}"))

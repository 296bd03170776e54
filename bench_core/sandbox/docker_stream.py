"""The output of a Docker exec, read without losing the bytes that came with the reply's headers.

docker-py reads an exec's multiplexed stream from the raw socket under the HTTP response
(`APIClient._get_raw_response_socket`), bypassing the buffered reader that parsed the reply's headers. When the
command has already written its output by the time the client reads those headers (a short command on a loaded
host), the first frames, often all of them, sit in that buffer and are never seen: the command's output reads as
empty (docker/docker-py#3332, #425), or as a stream that lost its alignment (`0 is not a valid stream`). Here the
stream is read through the buffered reader itself, frame by frame, and a stream that ends inside a frame raises
`ExecStreamBroken` instead of passing for a shorter output.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from typing import Any

from failatlas.bench_core.sandbox.errors import SandboxError

_HEADER = struct.Struct(">BxxxL")
_READ = 64 * 1024


class ExecStreamBroken(ConnectionResetError):
    """The exec's stream ended inside a frame or carried a frame of no known stream: its output is incomplete."""


def exec_output(api: Any, exec_id: str) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Start the created exec `exec_id` (attached, no TTY) and yield its output as (stdout, stderr) chunks, one
    side None, until the daemon closes the stream; the connection is closed at the end. Raises SandboxError when
    the daemon refuses the start, ExecStreamBroken when the stream ends inside a frame."""
    reader, response = _start(api, exec_id)
    return _frames(reader, response)


def exec_attached(api: Any, exec_id: str) -> tuple[Any, Iterator[tuple[bytes | None, bytes | None]]]:
    """Start the created exec `exec_id` (made with `stdin=True`): (the connection's socket, whose `sendall`
    writes to the command's stdin and whose `shutdown(SHUT_WR)` closes it, and the output as `exec_output`
    yields it). Raises SandboxError when the daemon refuses the start or the socket cannot be reached."""
    reader, response = _start(api, exec_id)
    sock = getattr(getattr(reader, "raw", None), "_sock", None)
    if sock is None or not hasattr(sock, "sendall"):
        response.close()
        raise SandboxError("cannot write to a command's stdin: this docker package's HTTP response has no socket "
                           "where docker 7.x keeps it (failatlas.bench_core.sandbox.docker_stream)")
    return sock, _frames(reader, response)


def _start(api: Any, exec_id: str) -> tuple[Any, Any]:
    import docker

    try:
        response = api._post_json(api._url("/exec/{0}/start", exec_id), headers={"Connection": "Upgrade",
                                  "Upgrade": "tcp"}, data={"Tty": False, "Detach": False}, stream=True)
        api._raise_for_status(response)
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot start a command in the sandbox: {exc}") from exc
    reader = _buffered_reader(response)
    api._disable_socket_timeout(getattr(reader, "raw", reader))  # a command may be silent for minutes
    return reader, response


def _buffered_reader(response: Any) -> Any:
    """The buffered reader that parsed the reply's headers (it may hold the first frames already)."""
    try:
        reader = response.raw._fp.fp
    except AttributeError:
        reader = None
    if reader is None or not hasattr(reader, "read1"):
        response.close()
        raise SandboxError("cannot read a command's output: this docker package's HTTP response has no buffered "
                           "reader where docker 7.x keeps it (failatlas.bench_core.sandbox.docker_stream)")
    return reader


def _exactly(reader: Any, n: int) -> bytes:
    """`n` bytes, fewer only at the end of the stream."""
    parts, got = [], 0
    while got < n:
        chunk = reader.read1(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _frames(reader: Any, response: Any) -> Iterator[tuple[bytes | None, bytes | None]]:
    try:
        while True:
            header = _exactly(reader, _HEADER.size)
            if not header:
                return
            if len(header) < _HEADER.size:
                raise ExecStreamBroken(f"the stream ended inside a frame header ({len(header)} of 8 bytes)")
            kind, size = _HEADER.unpack(header)
            if kind not in (1, 2):
                raise ExecStreamBroken(f"{kind} is not a valid stream (a frame of {size} bytes)")
            while size > 0:
                chunk = reader.read1(min(size, _READ))
                if not chunk:
                    raise ExecStreamBroken(f"the stream ended {size} bytes before the end of a frame")
                size -= len(chunk)
                yield (chunk, None) if kind == 1 else (None, chunk)
    finally:
        with contextlib.suppress(Exception):
            response.close()


def run_and_read(container: Any, argv: list[str], *, user: str = "") -> tuple[int | None, bytes]:
    """Run `argv` in `container` (a docker-py `Container`) to its end: (exit code, stdout). For the harness's own
    short reads in containers other than a sandbox (the egress proxy's log), where `Container.exec_run` would lose
    the output as the module docstring says. Raises SandboxError, ExecStreamBroken."""
    api = container.client.api
    exec_id = api.exec_create(container.id, argv, user=user)["Id"]
    out = b"".join(o for o, _ in exec_output(api, exec_id) if o)
    return api.exec_inspect(exec_id).get("ExitCode"), out

"""Reading an agent's files back out of a Docker sandbox: as the agent's user, never as root, within limits.

- `read_file` runs `head -c <cap>` as `spec.user`, after a shell check that no part of the path below the working
  copy is a link and that the file is a regular file; the daemon (root) never opens it.
- `copy_out` runs GNU `find | tar` as `spec.user`: find leaves out files over the per-file cap (and entries the
  user cannot read) before a byte of them is read, listing them apart so the report names them; the tar stream is
  read with a deadline into a `TreeWriter`, which applies the other `CopyLimits` and keeps no link that resolves
  outside the copy. Images without GNU find and tar fall back to the daemon's archive (links not followed) under
  the same writer; there, files over the cap are skipped in the stream, which the deadline bounds.
"""

from __future__ import annotations

import posixpath
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from failatlas.bench_core.sandbox import tarballs
from failatlas.bench_core.sandbox.errors import SandboxError, SandboxFileNotFoundError, SandboxPathError
from failatlas.bench_core.sandbox.model import CopyLimits, CopyReport
from failatlas.bench_core.sandbox.treecopy import TreeWriter

if TYPE_CHECKING:
    from failatlas.bench_core.sandbox.docker_sandbox import DockerSandbox

READ_TIMEOUT_S = 60.0
# prints "gnu" when the image has the GNU find and tar that `copy_out` runs as the agent's user
GNU_SH = ("{ find . -maxdepth 0 -readable -fprintf /dev/null '' && tar --version | grep -q GNU; } >/dev/null 2>&1"
          " && echo gnu || echo other")
# $1 the folder whose parts are checked, $2 the path below it, $3 the byte cap, $4 the whole path; exit 4: missing,
# 3: not a regular file (the reason on stderr)
_READ_SH = r"""
p=$1
set -f
IFS=/
for c in $2; do
  [ -n "$c" ] || continue
  p="$p/$c"
  if [ -L "$p" ]; then
    if [ "$p" = "$4" ]; then echo "is a symlink, not a file" >&2; else echo "is reached through the symlink $p" >&2; fi
    exit 3
  fi
  [ -e "$p" ] || exit 4
done
unset IFS
p=$4
if [ -d "$p" ]; then echo "is a folder, not a file" >&2; exit 3; fi
if [ -p "$p" ]; then echo "is a FIFO, not a regular file" >&2; exit 3; fi
if [ ! -f "$p" ]; then echo "is not a regular file" >&2; exit 3; fi
if [ ! -r "$p" ]; then echo "cannot be read by the sandbox user" >&2; exit 3; fi
exec head -c "$3" -- "$p"
"""
# $1 the parent folder, $2 the copied name, $3 the per-file cap; files over it and unreadable entries are listed on
# stderr (NUL-terminated records: kind, size, path) instead of being archived; exit 4: missing
_COPY_SH = r"""
cd -- "$1" 2>/dev/null || exit 4
[ -e "./$2" ] || [ -L "./$2" ] || exit 4
find "./$2" \( -type f -size +"$3"c -fprintf /dev/fd/4 'big\t%s\t%p\0' \) -o \
  \( \( -type f -o -type d \) ! -readable -fprintf /dev/fd/4 'unreadable\t%s\t%p\0' -prune \) -o \
  \( -type d ! -executable -fprintf /dev/fd/4 'unreadable\t%s\t%p\0' -prune \) -o \
  -print0 4>&2 2>/dev/null | tar --null --no-recursion --numeric-owner -T - -cf - 2>/dev/null
exit 0
"""


def read_file(box: DockerSandbox, path: str, *, max_bytes: int) -> bytes:
    """`DockerSandbox.read_file`: the first `max_bytes` bytes of the regular file `path`, read as the sandbox user.
    Raises SandboxFileNotFoundError, or SandboxPathError (not a regular file, a link, unreadable, too slow)."""
    base, rel, target = _read_args(box, path)
    cap = max(0, max_bytes)
    deadline = time.monotonic() + READ_TIMEOUT_S

    def check_time() -> None:
        if time.monotonic() > deadline:
            raise SandboxPathError(f"{path} in the sandbox could not be read within {READ_TIMEOUT_S:g} s")

    exec_id, marker, stream = box._stream_exec(["/bin/sh", "-c", _READ_SH, "read", base, rel, str(cap), target],
                                               check_time)
    chunks, kept = [], 0
    try:
        while chunk := stream.read(1 << 20):  # `head -c` prints at most the cap
            chunks.append(chunk[:cap - kept])
            kept += len(chunks[-1])
    finally:
        code = box._end_stream(exec_id, marker, stream)
    failed = _read_error(path, code, stream.stderr.text().strip())
    if failed is not None:
        raise failed
    return b"".join(chunks)


def _read_error(path: str, code: int | None, reason: str) -> OSError | None:
    """The error of `_READ_SH`'s exit `code` for `path` (None: it read the file)."""
    if code == 4:
        return SandboxFileNotFoundError(f"no file {path} in the sandbox")
    if code == 3:
        return SandboxPathError(f"{path} in the sandbox {reason}")
    if code != 0:
        return SandboxPathError(f"{path} in the sandbox cannot be read: {reason or f'exit {code}'}")
    return None


def _read_args(box: DockerSandbox, path: str) -> list[str]:
    """`_READ_SH`'s arguments but the cap for `path`: the folder whose parts are checked, the path below it, and
    the whole path."""
    target = box._path(path)
    if target == box.workdir or target.startswith(box.workdir.rstrip("/") + "/"):
        return [box.workdir, target[len(box.workdir):], target]
    return [posixpath.dirname(target), posixpath.basename(target), target]


# $1 a fence, $2 `_READ_SH`; then four arguments per file (`_READ_SH`'s): each file's bytes (or, when it cannot be
# read, the reason) and then a line "<fence> <exit code>". The fence is made after the agent's commands ended and every
# program here is the system's (`_stream_exec`'s PATH): no file can hold it and nothing of the agent's can print it
_READ_ALL_SH = r"""
fence=$1; script=$2; shift 2
while [ $# -ge 4 ]; do
  /bin/sh -c "$script" read "$1" "$2" "$3" "$4" 2>&1
  printf '\n%s %s\n' "$fence" "$?"
  shift 4
done
"""


def read_files(box: DockerSandbox, paths: list[str], *, max_bytes: int) -> list[bytes | OSError]:
    """`DockerSandbox.read_files`: each path as `read_file` reads it (the same checks, as the sandbox user), in one
    command; for each, its first `max_bytes` bytes or the error `read_file` would raise. Raises SandboxError when
    the command's output does not hold every file's answer (the sandbox failed under it)."""
    cap = max(0, max_bytes)
    fence = uuid.uuid4().hex
    argv = ["/bin/sh", "-c", _READ_ALL_SH, "read-all", fence, _READ_SH]
    for path in paths:
        base, rel, target = _read_args(box, path)
        argv += [base, rel, str(cap), target]
    deadline = time.monotonic() + READ_TIMEOUT_S

    def check_time() -> None:
        if time.monotonic() > deadline:
            raise SandboxPathError(f"{', '.join(paths)} in the sandbox could not be read within {READ_TIMEOUT_S:g} s")

    bound = len(paths) * (cap + len(fence) + 4096)  # each file at most the cap, a reason or a frame line beside it
    exec_id, marker, stream = box._stream_exec(argv, check_time)
    chunks, kept = [], 0
    try:
        while kept < bound and (chunk := stream.read(1 << 20)):
            chunks.append(chunk[:bound - kept])
            kept += len(chunks[-1])
    finally:
        box._end_stream(exec_id, marker, stream)
    out, rest = [], b"".join(chunks)
    frame = f"\n{fence} ".encode()
    for path in paths:
        body, found, rest = rest.partition(frame)
        code, newline, rest = rest.partition(b"\n")
        if not found or not newline or not code.isdigit():
            raise SandboxError(f"reading {', '.join(paths)} in the sandbox: the command ended before {path}")
        # a failed read's words were its stderr; `head` failing mid-file printed some of the file first: its last line
        failed = _read_error(path, int(code), body.decode(errors="replace").strip().rsplit("\n", 1)[-1][-300:])
        out.append(failed if failed is not None else body)
    return out


def copy_out(box: DockerSandbox, src: str, host_dest: str | Path, *, limits: CopyLimits | None) -> CopyReport:
    """`DockerSandbox.copy_out`: the file or folder `src` to `host_dest` within `limits`; what was left out.
    Raises SandboxFileNotFoundError when `src` is missing, SandboxError when the daemon fails."""
    source = box._path(src)
    parent, name = posixpath.dirname(source), posixpath.basename(source)
    if not name:
        raise SandboxPathError("cannot copy out the sandbox's root folder")
    with TreeWriter(host_dest, limits) as writer:
        if box._gnu_tools:
            _copy_as_user(box, parent, name, writer)
        else:
            _copy_from_daemon(box, source, name, writer)
        return writer.finish()


def _copy_as_user(box: DockerSandbox, parent: str, name: str, writer: TreeWriter) -> None:
    argv = ["/bin/sh", "-c", _COPY_SH, "copy", parent, name, str(writer.limits.max_file_bytes)]
    exec_id, marker, stream = box._stream_exec(argv, writer.check_time)
    try:
        tarballs.extract_stream(stream, name, writer)
    finally:
        code = box._end_stream(exec_id, marker, stream)
    if code == 4:
        raise SandboxFileNotFoundError(f"no file or folder {parent}/{name} in the sandbox")
    reasons = {b"big": f"over the per-file cap of {writer.limits.max_file_bytes} bytes",
               b"unreadable": "unreadable by the sandbox user"}
    for record in stream.stderr.head().split(b"\0")[:-1]:
        kind, _, rest = record.partition(b"\t")
        size, _, found = rest.partition(b"\t")
        rel = tarballs.relative_name(found.decode("utf-8", "surrogateescape"), name)
        if kind in reasons and rel is not None:
            writer.cut(rel, reasons[kind], int(size) if kind == b"big" and size.isdigit() else None)
    if stream.stderr.truncated:
        writer.cut("", f"more entries over the per-file cap or unreadable were left out (their list passed "
                       f"{stream.stderr.limit} bytes)")


def _copy_from_daemon(box: DockerSandbox, source: str, name: str, writer: TreeWriter) -> None:
    import docker

    try:
        chunks, _ = box._api.get_archive(box.container.id, source)
    except docker.errors.NotFound:
        raise SandboxFileNotFoundError(f"no file or folder {source} in the sandbox") from None
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot copy out of sandbox {box.container.name}: {exc}") from exc
    stream = tarballs.ChunkReader(chunks, check_time=writer.check_time)
    try:
        tarballs.extract_stream(stream, name, writer)
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot copy out of sandbox {box.container.name}: {exc}") from exc
    finally:
        stream.close()

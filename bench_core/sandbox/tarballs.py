"""Tar streams for copying files into and out of containers, bounded in memory, read with a deadline, and
extracted through a `TreeWriter`, which decides what is kept."""

from __future__ import annotations

import io
import queue
import stat
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from failatlas.bench_core.sandbox.output import CappedBuffer
from failatlas.bench_core.sandbox.treecopy import CopyStopped, TreeWriter

_SPOOL = 64 * 1024 * 1024
DAMAGED = "the archive ended early or is damaged"  # the start of `CopyReport.stopped` for a broken stream


def spooled() -> tempfile.SpooledTemporaryFile:
    """A buffer that stays in memory up to 64 MiB and spills to disk beyond."""
    return tempfile.SpooledTemporaryFile(max_size=_SPOOL)


def pack(src: Path, arcname: str, *, uid: int, gid: int) -> IO[bytes]:
    """A tar of the file or folder `src` stored as `arcname`, owned by uid:gid, rewound for reading."""
    def own(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
        return info

    buf = spooled()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(src), arcname=arcname, recursive=True, filter=own)
    buf.seek(0)
    return buf


def pack_bytes(name: str, data: bytes, *, uid: int, gid: int, mode: int = 0o644) -> bytes:
    """A tar holding one file."""
    return pack_files([(name, data)], uid=uid, gid=gid, mode=mode)


def pack_files(files: list[tuple[str, bytes]], *, uid: int, gid: int, mode: int = 0o644) -> bytes:
    """A tar holding these files, in this order (extracted in it: a file after another appears only once the one
    before it is complete)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), mode, uid, gid
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def pack_tree(entries: list[tuple[str, bytes | None]], *, uid: int, gid: int, mode: int = 0o644,
              dir_mode: int = 0o755) -> bytes:
    """A tar of folders (data None) and files, in this order, owned by uid:gid."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.uid, info.gid = uid, gid
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, dir_mode
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class ChunkReader(io.RawIOBase):
    """A readable stream over chunks from the daemon, pulled by a thread so that the reader's deadline holds even
    while the daemon sends nothing. Chunks are bytes, or (stdout, stderr) pairs of an exec, whose stderr is kept
    up to `stderr_limit` bytes. `check_time()` is called while waiting and may raise to end the read.

    Memory stays bounded: at most a few chunks wait in the queue. Once the reader stops (`finish`, `close`), the
    thread keeps pulling and drops stdout (keeping stderr): a stream nobody reads must not hold up the daemon.
    """

    def __init__(self, chunks: Iterable[bytes | tuple[bytes | None, bytes | None]], *,
                 check_time: Callable[[], None], stderr_limit: int = 1024 * 1024) -> None:
        super().__init__()
        self.stderr = CappedBuffer(stderr_limit)
        self._check_time = check_time
        self._queue: queue.Queue = queue.Queue(maxsize=8)
        self._pending = memoryview(b"")
        self._offset = 0
        self._got_end = False
        self._error: BaseException | None = None
        self._dropping = threading.Event()
        self._finished = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, args=(chunks,), daemon=True, name="failatlas-sandbox-pull").start()

    def _pump(self, chunks: Iterable) -> None:
        try:
            for chunk in chunks:
                if not self._offer(chunk):
                    self._keep_stderr(chunk)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, which raises it
            self._error = exc
        finally:
            self._finished.set()
            self._offer(None)

    def _offer(self, item: object) -> bool:
        """Queue `item` for the reader; False once the reader has stopped."""
        while not self._dropping.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _keep_stderr(self, item: object) -> None:
        if isinstance(item, tuple) and item[1]:
            with self._lock:
                self.stderr.write(item[1])

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._offset >= len(self._pending) and not self._got_end:
            self._check_time()
            try:
                item = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if item is None:
                self._got_end = True
                if self._error is not None:
                    raise self._error
                break
            self._keep_stderr(item)
            out = item[0] if isinstance(item, tuple) else item
            if out:
                self._pending, self._offset = memoryview(out), 0
        n = min(len(buffer), len(self._pending) - self._offset)
        buffer[:n] = self._pending[self._offset:self._offset + n]
        self._offset += n
        return n

    @property
    def ended(self) -> bool:
        """Whether the daemon has closed the stream."""
        return self._finished.is_set()

    def finish(self, seconds: float) -> bool:
        """Stop reading: drop what is still to come (keeping stderr) and wait up to `seconds` for the daemon to
        close the stream; whether it did."""
        self._dropping.set()
        self._drop_queued()
        ended = self._finished.wait(seconds)
        self._drop_queued()  # what the thread queued just before it saw the reader stop
        return ended

    def _drop_queued(self) -> None:
        while True:
            try:
                self._keep_stderr(self._queue.get_nowait())
            except queue.Empty:
                return

    def close(self) -> None:
        self._dropping.set()
        super().close()


def relative_name(name: str, top: str) -> str | None:
    """The path of an archive member below the copied path `top`; None when it is not below it."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or parts[0] != top:
        return None
    return "/".join(parts[1:])


def extract_stream(stream: IO[bytes], top: str, writer: TreeWriter) -> None:
    """Feed `writer` the members of the tar `stream` whose top entry is named `top`, in one pass.

    Nothing here trusts the archive: names, sizes and links are the writer's to check, and a stream that ends early
    or is not a tar ends the copy with the reason recorded. CopyStopped ends it quietly too.
    """
    try:
        with tarfile.open(fileobj=stream, mode="r|", encoding="utf-8", errors="surrogateescape") as tar:
            for member in tar:
                rel = relative_name(member.name, top)
                if rel is None:
                    writer.check_time()
                    writer.cut(member.name, "outside the copied path")
                    continue
                if member.isdir():
                    writer.directory(rel)
                elif member.isreg():
                    data = tar.extractfile(member)
                    writer.file(rel, member.size, data.read if data else (lambda _n: b""), member.mode,
                                member.mtime)
                elif member.issym():
                    writer.symlink(rel, member.linkname)
                elif member.islnk():
                    writer.hardlink(rel, relative_name(member.linkname, top))
                else:
                    writer.special(rel, _MODES.get(member.type, 0))
    except CopyStopped:
        pass
    except (tarfile.TarError, EOFError) as exc:
        writer.report.stopped = writer.report.stopped or f"{DAMAGED}: {exc}"


_MODES = {tarfile.FIFOTYPE: stat.S_IFIFO, tarfile.CHRTYPE: stat.S_IFCHR, tarfile.BLKTYPE: stat.S_IFBLK}

"""Writing a tree copied out of a sandbox onto the host, within `CopyLimits`, with no link that leaves it.

Every backend feeds a `TreeWriter` one entry at a time (folder, file, link, hard link, special file), from a tar
stream or from a walk of a host folder, and the writer decides what is kept. Links are created only once every
file is written, and then checked against the finished tree: a chain of links that escapes only once all of
them exist (`k -> n/../../x`, then `n -> ../..`) is caught whatever order the links came in. Until then nothing
is written through a link, because none exists.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from failatlas.bench_core.sandbox.model import CopyLimits, CopyReport
from failatlas.bench_core.tasks.data import is_data_link

_CHUNK = 1024 * 1024
# host failures that are the host's, not the tree's: they must surface as errors, never as a quietly smaller copy
_HOST_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ENOMEM}


class CopyStopped(Exception):
    """The copy must stop here (deadline, total cap, entry count); the reason is on the writer's report."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _file_mode(mode: int) -> int:
    """tarfile's 'data' filter rule: no set-id or sticky bits, no group/other write, owner read-write; executable
    bits only when the owner's is set."""
    mode &= 0o755
    if not mode & 0o100:
        mode &= ~0o111
    return mode | 0o600


_MAX_HOPS = 40  # the kernel's limit on links followed in one path


def _stays_inside(top: str, parts: list[str], target: str, hops: list[int]) -> bool:
    """Whether following `target` from the folder `top/parts` never climbs above `top`; `parts` ends as the
    place reached. Links met on the way are followed as the kernel would; a missing part is taken as named."""
    if target.startswith("/"):
        return False
    for name in target.split("/"):
        if name in ("", "."):
            continue
        if name == "..":
            if not parts:
                return False
            parts.pop()
            continue
        here = os.path.join(top, *parts, name)
        if not os.path.islink(here):
            parts.append(name)
            continue
        hops[0] += 1
        if hops[0] > _MAX_HOPS or not _stays_inside(top, parts, os.readlink(here), hops):
            return False
    return True


def drop_escaping_links(root: Path, links: list[Path]) -> list[tuple[Path, str]]:
    """Remove every link among `links` whose resolution climbs above `root` at any step (or loops), judged on the
    finished tree; returns the removed links with their targets. A link into a data input's mount (`/data/NAME/...`,
    `tasks.data.is_data_link`) stays, as in the repository it came from: it is never followed on the host.

    Following stays below `root` throughout, so a kept link stays inside wherever the tree is moved (a link that
    leaves and comes back in by the folder's name, `../top/x`, is removed). Each round judges all remaining links
    with all of them present, then removes the bad ones together, and repeats until none is bad: the result does
    not depend on the order the links are listed in.
    """
    top = str(root)
    remaining = sorted(links)
    dropped: list[tuple[Path, str]] = []
    while True:
        bad = []
        for link in remaining:
            folder = os.path.relpath(link.parent, top)
            parts = [] if folder == "." else folder.split(os.sep)
            target = os.readlink(link)
            if not is_data_link(target) and not _stays_inside(top, parts, target, [0]):
                bad.append(link)
        if not bad:
            return dropped
        for link in bad:
            dropped.append((link, os.readlink(link)))
            os.unlink(link)
        gone = set(bad)
        remaining = [link for link in remaining if link not in gone]


class TreeWriter:
    """Receives the entries of one copied path and writes what the limits allow to `host_dest`.

    Paths are relative POSIX paths below the copied path; '' is the copied path itself. Use it as a context
    manager, feed it entries, then `finish()` to place the tree at `host_dest` and get the report. An entry method
    raises `CopyStopped` when the copy must end (the reason is then in the report).
    """

    def __init__(self, host_dest: str | Path, limits: CopyLimits | None = None) -> None:
        self.dest = Path(host_dest)
        self.limits = limits or CopyLimits()
        self.deadline = time.monotonic() + self.limits.deadline_s
        self.report = CopyReport()
        self._entries = 0
        self._links: list[tuple[str, str]] = []
        self._cut_dirs: list[str] = []
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = Path(tempfile.mkdtemp(dir=self.dest.parent, prefix=".failatlas-copy-"))
        self._top = self._tmp / "top"

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    # -- what the feeders call --------------------------------------------------------------------------------------

    def check_time(self) -> None:
        """Raise CopyStopped once the deadline has passed (feeders call it while they wait for data too)."""
        if time.monotonic() > self.deadline:
            self.stop(f"the deadline of {self.limits.deadline_s:g} s passed")

    def _over_total(self, rel: str, size: int) -> None:
        """Cut `rel` for the total cap and stop the copy."""
        total = self.limits.max_total_bytes
        self.cut(rel, f"over the total cap of {total} bytes", size)
        self.report.over_total = True
        self.stop(f"the total cap of {total} bytes was reached at {rel or '.'}")

    def stop(self, reason: str) -> None:
        """End the copy here for `reason` (kept when a reason is already recorded)."""
        if self.report.stopped is None:
            self.report.stopped = reason
        raise CopyStopped(reason)

    def cut(self, rel: str, reason: str, size: int | None = None) -> None:
        """Record that the entry `rel` is left out."""
        self.report.add_cut(rel, reason, size)

    def directory(self, rel: str) -> bool:
        """A folder; False when it is left out (its entries then are too)."""
        host = self._admit(rel)
        if host is None:
            return False
        try:
            host.mkdir(exist_ok=True)
        except OSError as exc:
            self._unwritable(rel, exc)
            self._cut_dirs.append(rel)
            return False
        return True

    def file(self, rel: str, size: int, read: Callable[[int], bytes], mode: int = 0o644,
             mtime: float | None = None) -> bool:
        """A regular file of `size` bytes whose content `read(n)` returns in pieces; False when it is left out.

        The size is checked before a byte is read; a file that turns out longer than it said (it grew while being
        copied) is cut when it passes the per-file cap."""
        host = self._admit(rel)
        if host is None:
            return False
        limits = self.limits
        if size > limits.max_file_bytes:
            self.cut(rel, f"over the per-file cap of {limits.max_file_bytes} bytes", size)
            return False
        if self.report.bytes + size > limits.max_total_bytes:
            self._over_total(rel, size)
        written = 0
        try:
            with open(host, "wb") as out:
                while True:
                    self.check_time()
                    chunk = read(min(_CHUNK, limits.max_file_bytes + 1 - written))
                    if not chunk:
                        break
                    written += len(chunk)
                    if written > limits.max_file_bytes or self.report.bytes + written > limits.max_total_bytes:
                        break
                    out.write(chunk)
            os.chmod(host, _file_mode(mode))
            if mtime is not None:
                os.utime(host, (mtime, mtime))
        except OSError as exc:
            host.unlink(missing_ok=True)
            self._unwritable(rel, exc)
            return False
        except CopyStopped:
            host.unlink(missing_ok=True)
            raise
        if written > limits.max_file_bytes:
            host.unlink()
            self.cut(rel, f"grew past the per-file cap of {limits.max_file_bytes} bytes while copied", written)
            return False
        if self.report.bytes + written > limits.max_total_bytes:
            host.unlink()
            self._over_total(rel, written)
        self.report.files += 1
        self.report.bytes += written
        return True

    def symlink(self, rel: str, target: str) -> None:
        """A symbolic link; created at `finish()`, and kept only if it resolves inside the finished tree (or into a
        data input's mount)."""
        if self._admit(rel, create=False) is None:
            return
        if not target or "\0" in target or (target.startswith("/") and not is_data_link(target)):
            self.cut(rel, f"a symlink to the absolute path {target!r}, outside the copy")
            return
        self._links.append((rel, target))

    def hardlink(self, rel: str, target_rel: str | None) -> None:
        """A hard link to an entry copied earlier: written as a copy of that file."""
        host = self._admit(rel)
        if host is None:
            return
        source = self._host(target_rel) if target_rel is not None else None
        if source is None or not source.is_file() or source.is_symlink():
            self.cut(rel, "a hard link to a file that was not copied")
            return
        with open(source, "rb") as src:
            self._entries -= 1  # counted once, by the file call
            self.file(rel, source.stat().st_size, src.read, source.stat().st_mode)

    def special(self, rel: str, mode: int) -> None:
        """A FIFO, socket or device: never copied."""
        if self._admit(rel, create=False) is not None:
            self.cut(rel, f"{_kind(mode)}, not a regular file")

    # -- the end ------------------------------------------------------------------------------------------------------

    def finish(self) -> CopyReport:
        """Create the links, drop those that resolve outside the tree, place the tree at `host_dest`."""
        created = self._make_links()
        for link, target in drop_escaping_links(self._top, created):
            self.cut(self._rel_of(link), f"a symlink to {target!r} that leads out of the copy")
        if not os.path.lexists(self._top):
            return self.report
        if self.dest.is_dir() and not self.dest.is_symlink() and self._top.is_dir() and not self._top.is_symlink():
            shutil.copytree(self._top, self.dest, symlinks=True, dirs_exist_ok=True)
            links = [Path(here) / name for here, dirs, files in os.walk(self.dest)
                     for name in dirs + files if (Path(here) / name).is_symlink()]
            for link, target in drop_escaping_links(self.dest, links):
                self.cut(str(link.relative_to(self.dest)), f"a symlink to {target!r} that leads out of the copy")
        else:
            if os.path.lexists(self.dest) and (self.dest.is_symlink() or not self.dest.is_dir()):
                self.dest.unlink()
            self._top.rename(self.dest)
        return self.report

    # -- internals ----------------------------------------------------------------------------------------------------

    def _rel_of(self, link: Path) -> str:
        rel = os.path.relpath(link, self._top)
        return "" if rel == "." else rel

    def _host(self, rel: str) -> Path | None:
        """The staged path of `rel`, None when the name is unsafe (absolute, '..', NUL)."""
        if rel in ("", "."):
            return self._top
        parts = rel.split("/")
        if "\0" in rel or rel.startswith("/") or ".." in parts:
            return None
        return self._top.joinpath(*[p for p in parts if p not in ("", ".")])

    def _admit(self, rel: str, *, create: bool = True) -> Path | None:
        """Count the entry and check the deadline, its name, depth and folder; the staged path, or None when the
        entry is left out (recorded once per left-out folder)."""
        self.check_time()
        if rel and rel.split("/", 1)[0] in self.limits.skip_top:
            return None  # the harness's own (the masked repository's .git): not the agent's work, not counted
        self._entries += 1
        if self._entries > self.limits.max_entries:
            self.cut(rel, f"past the cap of {self.limits.max_entries} entries")
            self.stop(f"more than {self.limits.max_entries} entries")
        if any(rel.startswith(d + "/") for d in self._cut_dirs[-64:]):
            return None  # inside a folder left out, which is recorded
        host = self._host(rel)
        if host is None:
            self._cut_folder(rel, "an unsafe name")
            return None
        if host != self._top and len(Path(rel).parts) > self.limits.max_depth:
            self._cut_folder(rel, f"nested deeper than {self.limits.max_depth} folders")
            return None
        try:
            if host != self._top and not host.parent.is_dir():
                if create:
                    host.parent.mkdir(parents=True, exist_ok=True)
                if not host.parent.is_dir():
                    self.cut(rel, "its folder was not copied")
                    return None
        except OSError as exc:  # e.g. a path too long for the host
            self._unwritable(rel, exc)
            return None
        return host

    def _cut_folder(self, rel: str, reason: str) -> None:
        self.cut(rel, reason)
        self._cut_dirs.append(rel)

    def _unwritable(self, rel: str, exc: OSError) -> None:
        if exc.errno in _HOST_ERRNOS:
            raise exc
        self.cut(rel, f"cannot be written on the host: {exc.strerror or exc}")

    def _make_links(self) -> list[Path]:
        """Create the recorded links, each only inside a real folder of the tree (never through another link)."""
        created = []
        for rel, target in self._links:
            host = self._host(rel)
            if host == self._top:
                self.cut(rel, f"a symlink to {target!r}: the copied path itself is a link")
                continue
            parent = self._real_folder(Path(rel).parent)
            if parent is None:
                self.cut(rel, "a symlink whose folder was not copied")
                continue
            try:
                os.symlink(target, Path(rel).name, dir_fd=parent)
                created.append(host)
            except OSError as exc:
                self._unwritable(rel, exc)
            finally:
                os.close(parent)
        return created

    def _real_folder(self, rel: Path) -> int | None:
        """An open descriptor of the staged folder `rel`, reached without following any link; None if there is none."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            fd = os.open(self._top, flags)
        except OSError:
            return None
        for part in rel.parts:
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = child
        return fd


def copy_host_tree(source: Path, writer: TreeWriter, *, follow_top: bool = False) -> None:
    """Feed `writer` the tree at the host path `source` without following any link in it (`follow_top`: the
    path itself may be a link, e.g. a mounted input). Bounded: one open folder per level, sizes checked before
    reading. Stops quietly on CopyStopped (the reason is on the writer's report)."""
    with contextlib.suppress(CopyStopped):
        _walk(source, writer, follow_top)


def _walk(source: Path, writer: TreeWriter, follow_top: bool) -> None:
    st = os.stat(source) if follow_top else os.lstat(source)
    if stat.S_ISLNK(st.st_mode):
        writer.symlink("", os.readlink(source))
        return
    if stat.S_ISREG(st.st_mode):
        _copy_file(None, str(source), "", writer)
        return
    if not stat.S_ISDIR(st.st_mode):
        writer.special("", st.st_mode)
        return
    top = os.open(source, os.O_RDONLY | os.O_DIRECTORY | (0 if follow_top else os.O_NOFOLLOW))
    if not writer.directory(""):
        os.close(top)
        return
    stack = [(top, "", os.scandir(top))]
    try:
        while stack:
            fd, rel, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(fd)
                stack.pop()
                continue
            child = f"{rel}/{entry.name}" if rel else entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                writer.cut(child, "vanished while copied")
                continue
            if stat.S_ISDIR(mode):
                if not writer.directory(child):
                    continue
                try:
                    sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                    stack.append((sub, child, os.scandir(sub)))
                except OSError as exc:
                    writer.cut(child, f"cannot be read: {exc.strerror}")
            elif stat.S_ISLNK(mode):
                writer.symlink(child, os.readlink(entry.name, dir_fd=fd))
            elif stat.S_ISREG(mode):
                _copy_file(fd, entry.name, child, writer)
            else:
                writer.special(child, mode)
    finally:
        for fd, _rel, entries in stack:
            entries.close()
            os.close(fd)


def _copy_file(dir_fd: int | None, name: str, rel: str, writer: TreeWriter) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        writer.cut(rel, f"cannot be read: {exc.strerror}")
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped since it was listed
            writer.special(rel, st.st_mode)
            return
        writer.file(rel, st.st_size, lambda n: os.read(fd, n), st.st_mode, st.st_mtime)
    finally:
        os.close(fd)

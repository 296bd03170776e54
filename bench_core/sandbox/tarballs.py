"""Tar streams for copying files into and out of containers, bounded in memory and safe to extract."""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

_SPOOL = 64 * 1024 * 1024


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
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.uid, info.gid = len(data), mode, uid, gid
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def collect(chunks: Iterable[bytes]) -> IO[bytes]:
    """Spool a tar stream from the daemon, rewound for reading."""
    buf = spooled()
    for chunk in chunks:
        buf.write(chunk)
    buf.seek(0)
    return buf


def _safe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's 'data' filter, but a member it rejects (absolute or escaping link) is skipped, not fatal."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def extract_to(archive: IO[bytes], top: str, host_dest: Path) -> None:
    """Extract a tar whose top entry is `top` so that entry becomes `host_dest`."""
    host_dest = Path(host_dest)
    host_dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=host_dest.parent, prefix=".failatlas-copy-") as tmp, \
            tarfile.open(fileobj=archive, mode="r|") as tar:
        tar.extractall(tmp, filter=_safe)
        got = Path(tmp) / top
        if host_dest.is_dir() and got.is_dir():
            shutil.copytree(got, host_dest, symlinks=True, dirs_exist_ok=True)
        else:
            if host_dest.exists() and not host_dest.is_dir():
                host_dest.unlink()
            got.replace(host_dest)


def first_file(archive: IO[bytes]) -> tarfile.TarInfo | bytes:
    """The content of the first member when it is a regular file, else its TarInfo (folder, link)."""
    with tarfile.open(fileobj=archive, mode="r|") as tar:
        for member in tar:
            if member.isfile():
                f = tar.extractfile(member)
                return f.read() if f else b""
            return member
    raise tarfile.ReadError("empty archive")

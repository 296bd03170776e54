"""An image's root filesystem for bwrap sandboxes: unpacked once into a local cache, bound read-only at `/`.

A sandbox spec that names an image (a task's `resources.image`, `--image`, scoring's image: `image` among the spec's
set fields) runs on `<cache>/<image made safe>/` where `<cache>` is `$XDG_CACHE_HOME/failatlas/rootfs`
(`~/.cache/failatlas/rootfs`); `$FAILATLAS_BWRAP_ROOTFS` wins when set; a spec without an image runs on the host's
system folders. The cache is filled from the image by `failatlas sandbox build-image --rootfs` or the bwrap kind's
`prepare(image)`: `docker export` of a container created from the image (never started), streamed through
`safe_extract`, into a temporary folder beside the final one that is then renamed (all or nothing).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import IO

from failatlas.bench_core.sandbox import bwrap_setup as setup
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.model import SandboxSpec

_COPY_CHUNK = 1024 * 1024
_IMAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/failatlas/rootfs` (default `~/.cache/failatlas/rootfs`)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "failatlas" / "rootfs"


def rootfs_dir(image: str) -> Path:
    """The cache folder of `image`: its name with anything but letters, digits, `.`, `_`, `-` made `_`, plus a
    short hash of the exact name (so `a/b` and `a_b` differ)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", image)[:100].lstrip(".") or "image"
    return cache_root() / f"{safe}-{hashlib.sha256(image.encode()).hexdigest()[:10]}"


def root_for(spec: SandboxSpec) -> str | None:
    """The root folder a bwrap sandbox of `spec` binds at `/`: `$FAILATLAS_BWRAP_ROOTFS` when set, else the cached
    root of the image the spec names (SandboxError when there is none), else None (the host's system folders)."""
    chosen = os.environ.get(setup.ROOTFS_ENV)
    if chosen:
        return chosen
    if "image" not in spec.model_fields_set:
        return None
    path = require_rootfs(spec.image)
    if setup.host_uid() is not None and not setup.is_world_traversable(path):
        raise SandboxError(f"the root filesystem of image {spec.image} in {path} is not reachable by a sandbox's own "
                           f"user: point $XDG_CACHE_HOME at a folder everyone may pass through and run "
                           f"`{make_command(spec.image)}` again")
    return str(path)


def make_command(image: str) -> str:
    return f"failatlas sandbox build-image --tag {image} --rootfs"


def require_rootfs(image: str) -> Path:
    """The cached root filesystem of `image`; a one-line SandboxError naming the image and the command that makes
    it when the cache has none (never the host root instead)."""
    path = rootfs_dir(image)
    if not (path / "etc").is_dir():
        raise SandboxError(f"no root filesystem of image {image} for bwrap sandboxes in {path}: make it with "
                           f"`{make_command(image)}` (or set $FAILATLAS_BWRAP_ROOTFS)")
    return path


def build_rootfs(image: str, *, force: bool = False) -> tuple[Path, bool]:
    """Unpack `image`'s root filesystem into the cache from `docker export`; (folder, whether it was unpacked now).
    Keeps a cached one unless `force`. SandboxError when Docker or the image is not there."""
    final = rootfs_dir(image)
    if (final / "etc").is_dir() and not force:
        return final, False
    docker = shutil.which("docker")
    if docker is None:
        raise SandboxError(f"cannot unpack image {image} for bwrap: no docker command here (unpack it where Docker "
                           f"answers, copy {final} here, or set $FAILATLAS_BWRAP_ROOTFS)")
    if not _IMAGE_NAME.fullmatch(image):  # never an option to docker
        raise SandboxError(f"cannot unpack image {image!r} for bwrap: not an image name")
    created = subprocess.run([docker, "create", "--pull", "never", image, "/bin/true"], capture_output=True,
                             text=True, check=False)
    if created.returncode != 0:
        raise SandboxError(f"cannot unpack image {image} for bwrap: docker create failed: "
                           f"{created.stderr.strip()[:300]}")
    container = created.stdout.strip()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        with subprocess.Popen([docker, "export", container], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) as proc:
            try:
                safe_extract(proc.stdout, tmp)
            finally:
                proc.stdout.close()
                err = proc.stderr.read().decode(errors="replace")
        if proc.returncode != 0:
            raise SandboxError(f"cannot unpack image {image} for bwrap: docker export failed: {err.strip()[:300]}")
        os.chmod(tmp, 0o755)
        if (final / "etc").is_dir() and not force:
            # a concurrent unpack finished first and sandboxes may already run on it: keep it, drop ours
            return final, False
        if final.exists():  # --force, or a partial folder: the old one goes, then the rename
            old = final.parent / f".{final.name}.old-{os.getpid()}"
            os.rename(final, old)
            shutil.rmtree(old, ignore_errors=True)
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([docker, "rm", "-f", container], capture_output=True, check=False)
    return final, True


def _member_path(name: str) -> PurePosixPath:
    """A member's path relative to the destination; SandboxError for an absolute path or one with `..`."""
    if name.startswith("/"):
        raise SandboxError(f"refused tar member {name!r}: an absolute path")
    parts = [p for p in PurePosixPath(name).parts if p != "."]
    if ".." in parts:
        raise SandboxError(f"refused tar member {name!r}: a '..' component")
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _parent_dir(dest: Path, rel: PurePosixPath) -> Path:
    """The real folder `rel`'s parent is in below `dest`, made where missing; SandboxError when a component is a
    link or not a folder (a write through a link the archive planted would land outside `dest`)."""
    here = dest
    for part in rel.parts[:-1]:
        here = here / part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            os.mkdir(here, 0o755)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise SandboxError(f"refused tar member {str(rel)!r}: {here.relative_to(dest)} is a link or a file")
    return here


def safe_extract(stream: IO[bytes], dest: Path) -> int:
    """Extract the tar `stream` (read once, in order) into the folder `dest`: absolute paths, `..` components and
    writes through links refused (SandboxError), symbolic links kept as links (their targets untouched: they are
    read inside the sandbox's root), hard links only to members already extracted, device nodes and FIFOs skipped,
    setuid/setgid bits dropped, owners not kept. Returns how many members were written."""
    dest = Path(dest)
    dirs: list[tuple[Path, int]] = []
    written = 0
    with tarfile.open(fileobj=stream, mode="r|*") as tar:
        for member in tar:
            rel = _member_path(member.name)
            if rel == PurePosixPath("."):
                continue
            if member.ischr() or member.isblk() or member.isfifo():
                continue
            target = _parent_dir(dest, rel) / rel.name
            mode = member.mode & 0o1777
            if member.isdir():
                with contextlib.suppress(FileExistsError):
                    os.mkdir(target, 0o755)
                if not stat.S_ISDIR(os.lstat(target).st_mode):
                    raise SandboxError(f"refused tar member {member.name!r}: a link or a file is there")
                dirs.append((target, mode))
            elif member.issym():
                _replace(target)
                os.symlink(member.linkname, target)
            elif member.islnk():
                source_rel = _member_path(member.linkname)
                source = _parent_dir(dest, source_rel) / source_rel.name
                if not source.is_file() or source.is_symlink():
                    raise SandboxError(f"refused tar member {member.name!r}: a hard link to a non-file")
                _replace(target)
                os.link(source, target, follow_symlinks=False)
            elif member.isreg():
                _replace(target)
                src = tar.extractfile(member)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(src, out, _COPY_CHUNK)
                os.chmod(target, mode)
            else:
                continue
            written += 1
    for path, mode in reversed(dirs):  # last, so read-only folders could be filled
        os.chmod(path, mode)
    return written


def _replace(target: Path) -> None:
    """Remove a non-folder already at `target` (a later member wins, as with tar); a folder there is refused."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise SandboxError(f"refused tar member {target.name!r}: a folder is there")
    os.unlink(target)

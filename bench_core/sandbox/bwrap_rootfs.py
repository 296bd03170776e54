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
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        export_image(image, tmp, why="for bwrap", hint=f"unpack it where Docker answers, copy {final} here, or set "
                     f"${setup.ROOTFS_ENV}")
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
    return final, True


def export_image(image: str, dest: Path, *, why: str, hint: str = "", only: str | None = None) -> str:
    """Unpack `image`'s files (those under the top folder `only`, when given) into the folder `dest` through
    `docker export` of a container created from it (never started) and `safe_extract`; the id of the image the
    container was created from. SandboxError, saying `why` the image was unpacked, when Docker, the image or the
    export fails."""
    docker = shutil.which("docker")
    if docker is None:
        raise SandboxError(f"cannot unpack image {image} {why}: no docker command here" + (f" ({hint})" if hint
                                                                                             else ""))
    if not _IMAGE_NAME.fullmatch(image):  # never an option to docker
        raise SandboxError(f"cannot unpack image {image!r} {why}: not an image name")
    created = subprocess.run([docker, "create", "--pull", "never", image, "/bin/true"], capture_output=True,
                             text=True, check=False)
    if created.returncode != 0:
        raise SandboxError(f"cannot unpack image {image} {why}: docker create failed: "
                           f"{created.stderr.strip()[:300]}")
    container = created.stdout.strip()
    try:
        image_id = subprocess.run([docker, "inspect", "--format", "{{.Image}}", container], capture_output=True,
                                  text=True, check=False).stdout.strip()
        with subprocess.Popen([docker, "export", container], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) as proc:
            try:
                safe_extract(proc.stdout, dest, only=only)
            finally:
                proc.stdout.close()
                err = proc.stderr.read().decode(errors="replace")
        if proc.returncode != 0:
            raise SandboxError(f"cannot unpack image {image} {why}: docker export failed: {err.strip()[:300]}")
    finally:
        subprocess.run([docker, "rm", "-f", container], capture_output=True, check=False)
    return image_id


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


def safe_extract(stream: IO[bytes], dest: Path, *, only: str | None = None) -> int:
    """Extract the tar `stream` (read once, in order) into the folder `dest`: absolute paths, `..` components and
    writes through links refused (SandboxError), symbolic links kept as links (their targets untouched: they are
    read inside the sandbox's root), hard links only to members already extracted, device nodes and FIFOs skipped,
    setuid/setgid bits dropped, owners not kept, modification times kept (Python checks its compiled files against
    their sources' times: without them it compiles every module again at each import, on a read-only root where
    nothing is saved). With `only`, members outside that top folder are passed over. Returns how many members were
    written."""
    dest = Path(dest)
    dirs: list[tuple[Path, int, int]] = []
    written = 0
    with tarfile.open(fileobj=stream, mode="r|*") as tar:
        for member in tar:
            rel = _member_path(member.name)
            if rel == PurePosixPath(".") or (only is not None and rel.parts[0] != only):
                continue
            if only is not None and member.islnk() and _member_path(member.linkname).parts[:1] != (only,):
                continue  # a hard link to a file left out
            if member.ischr() or member.isblk() or member.isfifo():
                continue
            target = _parent_dir(dest, rel) / rel.name
            mode = member.mode & 0o1777
            if member.isdir():
                with contextlib.suppress(FileExistsError):
                    os.mkdir(target, 0o755)
                if not stat.S_ISDIR(os.lstat(target).st_mode):
                    raise SandboxError(f"refused tar member {member.name!r}: a link or a file is there")
                dirs.append((target, mode, member.mtime))
            elif member.issym():
                _replace(target)
                os.symlink(member.linkname, target)
                _set_mtime(target, member.mtime)
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
                _set_mtime(target, member.mtime)
            else:
                continue
            written += 1
    for path, mode, mtime in reversed(dirs):  # last, so read-only folders could be filled and keep their times
        os.chmod(path, mode)
        _set_mtime(path, mtime)
    return written


def _set_mtime(path: Path, mtime: float) -> None:
    """`path`'s access and modification times set to `mtime`, a link itself never followed; a time the file system
    cannot hold (an archive may carry any number) leaves the time of the unpack."""
    with contextlib.suppress(OverflowError, ValueError, OSError):
        os.utime(path, (mtime, mtime), follow_symlinks=False)


def _replace(target: Path) -> None:
    """Remove a non-folder already at `target` (a later member wins, as with tar); a folder there is refused."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise SandboxError(f"refused tar member {target.name!r}: a folder is there")
    os.unlink(target)

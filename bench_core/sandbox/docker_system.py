"""The image's system folders bound read-only from the host, where Docker's storage driver is FUSE.

Under `fuse-overlayfs` every file a container opens passes through a FUSE daemon on the host. A sandbox's Python
opens thousands of them at each start (the interpreter, numpy, scikit-learn), and a `failatlas demo` spent 47 of its
379 busy CPU seconds in those daemons (benchmarks/RESULTS.md). So on such a host a Docker sandbox gets `/usr/lib` and
`/usr/bin` as read-only bind mounts of the image's own files, unpacked once on the host by root into a folder named
by the image's id (`system_dir`), and its other folders from the image as before. Not `/usr/sbin`: Docker puts its
init at `/sbin/docker-init`, and `/sbin` is `/usr/sbin` in the image.

A folder, once there, is never changed or replaced: a container's binds, and its restart, always find the files of
its own image (an image built again under the same tag has another id, so another folder). The folders are bound
only when:
- the folder of the container's own image id exists (it is renamed into place whole, so it is complete);
- each bound folder, and every folder above it up to `/`, is a real folder (no link) owned by root and writable by
  nobody else (a world-writable folder above counts only with its sticky bit, as `/tmp`'s, since nobody else can
  then move root's folder in it); the unpack itself refuses an image with anything under them that a user other
  than root could write;
- the sandbox's user is not root (a root user could install into the image's folders, not into a read-only bind);
- the sandbox has no GPUs (the NVIDIA runtime mounts its libraries into `/usr/lib`, which a read-only bind refuses);
- `$FAILATLAS_DOCKER_SYSTEM_BINDS` is not `0`.
Anything else starts the container on the image's own folders, exactly as before. A read-only bind is read-only for
root in the container as well, and the container has no capability to unmount it. What differs inside: the unpack
drops setuid and setgid bits and file capabilities (which `no-new-privileges` ignores there anyway) and owners (all
root's), hard links are separate files, the two folders are mount points of the host's file system (`find -xdev`
stops there), and `/proc/self/mountinfo` shows the host folder's path.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from failatlas.bench_core.sandbox.bwrap_rootfs import cache_root, export_image
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.model import SandboxSpec

FOLDERS = ("usr/lib", "usr/bin")
FUSE_DRIVERS = frozenset({"fuse-overlayfs"})
SWITCH = "FAILATLAS_DOCKER_SYSTEM_BINDS"
_IMAGE_ID = re.compile(r"sha256:([0-9a-f]{64})")

_DRIVERS: dict[str, str] = {}  # the storage driver, by the daemon's base URL (it does not change while we run)
_DRIVERS_LOCK = threading.Lock()


def storage_driver(client: Any) -> str:
    """The Docker daemon's storage driver (`docker info`'s Driver), asked once per daemon and process."""
    url = str(getattr(getattr(client, "api", None), "base_url", ""))
    with _DRIVERS_LOCK:
        if url not in _DRIVERS:
            _DRIVERS[url] = str(client.info().get("Driver", ""))
        return _DRIVERS[url]


def wanted(client: Any) -> bool:
    """Whether this host's Docker sandboxes would bind system folders: a FUSE storage driver, not switched off."""
    return os.environ.get(SWITCH, "1") != "0" and storage_driver(client) in FUSE_DRIVERS


def system_dir(image_id: str) -> Path | None:
    """The folder holding the files of the image `image_id` (`sha256:<hex>`) for binds; None for another form."""
    found = _IMAGE_ID.fullmatch(image_id)
    return cache_root().parent / "docker-system" / found.group(1) if found else None


def _root_user(user: str) -> bool:
    name = user.split(":", 1)[0]
    return name in ("root", "0")


def _safe_chain(path: Path) -> bool:
    """`path` and every folder above it: real folders owned by root that nobody else can write (above it, a
    sticky world-writable folder such as /tmp is safe: nobody else can move root's folder in it)."""
    here, leaf = path, True
    while True:
        try:
            st = os.lstat(here)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
            return False
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and (leaf or not st.st_mode & stat.S_ISVTX):
            return False
        if here.parent == here:
            return True
        here, leaf = here.parent, False


def system_binds(client: Any, spec: SandboxSpec, image_id: str) -> list[tuple[str, str]]:
    """(host folder, target) for each system folder a container of `spec` from the image `image_id` gets bound
    read-only; empty where any condition of the module docstring fails."""
    if spec.gpu_ids or _root_user(spec.user) or not wanted(client):
        return []
    root = system_dir(image_id)
    if root is None:
        return []
    binds = [(root / folder, f"/{folder}") for folder in FOLDERS]
    if not all(_safe_chain(host) for host, _target in binds):
        return []
    return [(str(host), target) for host, target in binds]


def _others_may_write(root: Path) -> str | None:
    """The first of the bound folders of `root`, or of the entries below them, that a user other than root could
    write; None when there is none."""
    for folder in FOLDERS:
        paths = [str(root / folder)]
        for where, dirs, files in os.walk(root / folder):
            paths += [os.path.join(where, name) for name in [*dirs, *files]]
        for path in paths:
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode) and (st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
                return os.path.relpath(path, root)
    return None


def unpack(image: str, image_id: str) -> Path:
    """Unpack the `usr` folder of `image` into `system_dir(image_id)` (kept when there); the folder. SandboxError
    when it cannot be unpacked, the tag names another image by now, or others could write what it holds."""
    final = system_dir(image_id)
    if final is None:
        raise SandboxError(f"cannot unpack image {image} for Docker's binds: {image_id!r} is not an image id")
    if final.is_dir():
        return final
    final.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    try:
        unpacked = export_image(image, tmp, why="for Docker's binds", only="usr")
        if unpacked != image_id:
            raise SandboxError(f"cannot unpack image {image} for Docker's binds: the tag names {unpacked[:19]} now, "
                               f"not {image_id[:19]}")
        writable = _others_may_write(tmp)
        if writable is not None:
            raise SandboxError(f"image {image} is not bound from the host: its {writable} is writable by users other "
                               f"than root")
        os.chmod(tmp, 0o755)
        if not final.is_dir():  # a concurrent unpack of the same image may have won: its folder stays
            os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def prepare(client: Any, image: str, image_id: str, say: Callable[[str], None]) -> None:
    """Unpack `image` where this host's sandboxes would bind its folders and it is not unpacked yet (about 15 s and
    1.1 GB for the default image); only root, since the folders must be root's. A failure is said, and the
    sandboxes then read the image's own folders."""
    if not wanted(client) or os.geteuid() != 0:
        return
    final = system_dir(image_id)
    if final is None or final.is_dir():
        return
    say(f"unpacking the image's /usr for read-only binds ({storage_driver(client)} is slow to read): {final}")
    try:
        unpack(image, image_id)
    except SandboxError as exc:
        say(f"not bound: {exc.one_line()}")


def remove_stale(client: Any) -> list[str]:
    """Remove the unpacked folders of images Docker no longer has that no container (running or stopped) binds; the
    folders removed. Only entries named by an image id, real folders (a link is left alone), are considered:
    temporary folders of an unpack may belong to one in progress. An image built again keeps its old folder while
    the old image exists (`docker image prune` removes it); this then removes the folder."""
    top = cache_root().parent / "docker-system"
    if not top.is_dir() or top.is_symlink():
        return []
    images = {str(i.id) for i in client.images.list(all=True)}
    bound: set[str] = set()
    for container in client.containers.list(all=True, ignore_removed=True):
        for mount in container.attrs.get("Mounts") or []:
            bound.add(str(mount.get("Source") or ""))
    removed = []
    for entry in sorted(top.iterdir()):
        if not re.fullmatch(r"[0-9a-f]{64}", entry.name) or entry.is_symlink() or not entry.is_dir():
            continue
        if f"sha256:{entry.name}" in images:
            continue
        if any(source == str(entry) or source.startswith(f"{entry}/") for source in bound):
            continue
        # renamed out of the way first, so that no later bind can find a half-removed folder under its id
        try:
            gone = Path(tempfile.mkdtemp(prefix=".gone-", dir=top))
            os.rename(entry, gone / entry.name)
        except OSError:  # not ours to remove (another user's cache), or gone meanwhile
            continue
        shutil.rmtree(gone, ignore_errors=True)
        removed.append(str(entry))
    return removed

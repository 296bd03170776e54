"""Folder trees in the cache: copied without git's data or special files, links that lead out dropped, hashed
by content when no commit names them."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

TREE_HASH_PREFIX = "tree-sha256:"
_CHUNK = 1 << 20


def copy_folder(src: Path, dest: Path) -> None:
    """Copy the folder `src` to `dest` (which must not exist): files, folders and links as links; `.git` and
    special files (FIFOs, sockets, devices, which a copy would block on or could not reproduce) left out."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        skipped = []
        for name in names:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if name == ".git" or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                skipped.append(name)
        return skipped

    shutil.copytree(src, dest, symlinks=True, ignore=ignore)


def remove_git(root: Path) -> None:
    """Remove the repository data (`.git`, a folder or a file) at the top of `root`: the cache holds the tree
    at the pinned commit, not the history (which would show the agent the files masked later)."""
    git_dir = root / ".git"
    if git_dir.is_dir() and not git_dir.is_symlink():
        shutil.rmtree(git_dir)
    elif git_dir.exists() or git_dir.is_symlink():
        git_dir.unlink()


def drop_outside_links(root: Path) -> list[str]:
    """Remove every link under `root` that leads outside it (an absolute target, `..` out, a loop); returns their
    paths relative to `root`. A repository's link to `~/.ssh` must not carry a host file into a sandbox later. A
    link into a data input's mount (`/data/NAME/...`, `tasks.data.is_data_link`) is kept: that is how a
    repository's fixed data path (`src/datasets/ml-1m/ratings.dat`) reaches `--data NAME=PATH`."""
    from failatlas.bench_core.tasks.data import is_data_link

    base = root.resolve()
    dropped = []
    for folder, dirs, files in os.walk(base):
        for name in [*dirs, *files]:
            link = Path(folder) / name
            if not link.is_symlink() or is_data_link(os.readlink(link)):
                continue
            try:
                inside = link.resolve().is_relative_to(base)
            except (RuntimeError, OSError):  # a loop of links
                inside = False
            if not inside or os.path.isabs(os.readlink(link)):
                link.unlink()
                dropped.append(link.relative_to(base).as_posix())
    return sorted(dropped)


def tree_hash(root: Path) -> str:
    """`tree-sha256:<hex>`: a hash of every path under `root` with its kind, executable bit and content (a
    link: its target). Equal trees hash equal wherever they lie; used as the pin when no commit is known."""
    digest = hashlib.sha256()
    for path in sorted(_walk(root), key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            digest.update(f"L {rel}\0{os.readlink(path)}\0".encode())
        elif stat.S_ISDIR(mode):
            digest.update(f"D {rel}\0".encode())
        else:
            digest.update(f"F{'x' if mode & 0o111 else '-'} {rel}\0{_file_hash(path)}\0".encode())
    return TREE_HASH_PREFIX + digest.hexdigest()


def _walk(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):
        found += [Path(folder) / name for name in [*dirs, *files]]
    return found


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def folder_size(root: Path) -> int:
    """Bytes of the regular files under `root` (links not followed)."""
    return sum(p.lstat().st_size for p in _walk(root) if stat.S_ISREG(p.lstat().st_mode))

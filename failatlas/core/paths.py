"""Paths that come from files we do not trust (task files, imports): checked, then kept inside their folder.

A path named by a task file is relative, holds no `..` and, once its links are followed, stays inside the folder
it belongs to (the task's folder, the repository, the workspace). These helpers refuse anything else with an
InputError naming the file, line and field, so a task file can neither read a host file into a sandbox nor make
FailAtlas write or delete one.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from failatlas.core.errors import InputError


def relative_path(value: object, *, within: str = "the repository root", path: str | None = None,
                  line: int | None = None, field: str | None = None) -> str:
    """`value` as a clean relative POSIX path (`./` and repeated slashes dropped).

    Raises InputError (naming `path`, `line`, `field`) when it is not text, is empty, absolute, holds `..` or a
    NUL, or names the folder itself.
    """
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise InputError(f"must be a path relative to {within}, not {value!r}", path=path, line=line, field=field)
    pure = PurePosixPath(value)
    if pure.is_absolute():
        raise InputError(f"must be a path relative to {within}, not the absolute path {value!r}", path=path,
                         line=line, field=field)
    if ".." in pure.parts:
        raise InputError(f"{value!r} leads outside {within}: '..' is not allowed", path=path, line=line,
                         field=field)
    clean = pure.as_posix()
    if clean in ("", "."):
        raise InputError(f"{value!r} names {within} itself, not a path inside it", path=path, line=line,
                         field=field)
    return clean


def inside(root: Path, value: object, *, within: str = "the repository root", follow_last: bool = True,
           path: str | None = None, line: int | None = None, field: str | None = None) -> Path:
    """`root / value`, checked: `value` is a relative path (see `relative_path`) and, links followed, the result
    stays inside `root`. With `follow_last=False` a link as the last part is not followed (deleting it deletes
    the link), only the folders on the way must stay inside. Raises InputError naming `path`, `line`, `field`.
    """
    rel = relative_path(value, within=within, path=path, line=line, field=field)
    base = Path(root).resolve()
    joined = base / rel
    resolved = joined.resolve() if follow_last else joined.parent.resolve() / joined.name
    if resolved != base and not resolved.is_relative_to(base):
        raise InputError(f"{value!r} leads outside {within} {base} (through a link)", path=path, line=line,
                         field=field)
    return resolved if follow_last else joined


def remove_inside(root: Path, value: str, *, field: str | None = None) -> bool:
    """Delete `value` (a file, link or folder) under `root` if it is there, never anything outside `root`.

    A link as the last part is removed itself, never followed. When a link on the way leads out of `root`
    (an agent's own doing in its workspace), nothing is removed. Returns whether something was removed.
    Raises InputError when `value` is not a relative path without `..` (the task's fault, naming `field`).
    """
    try:
        target = inside(root, value, follow_last=False, field=field)
    except InputError:
        relative_path(value, field=field)  # a bad path is the task's error; a link leading out is not
        return False
    if target.is_symlink() or target.is_file():
        target.unlink()
        return True
    if target.is_dir():
        shutil.rmtree(target)
        return True
    if target.exists():  # a FIFO, a socket
        target.unlink()
        return True
    return False


__all__ = ["inside", "relative_path", "remove_inside"]

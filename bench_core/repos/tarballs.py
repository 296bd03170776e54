"""Unpacking a repository tarball (`.tar.gz`, `.tgz`, `.tar`) safely: nothing it holds may write outside the
folder it is unpacked into.

Every member is checked before anything is written: a name that is absolute or holds `..`, a link (symbolic or
hard) that leads out of the tree or is absolute, a device file, FIFO or other special member, a member larger
than MAX_MEMBER_BYTES, more than MAX_TREE_BYTES in all or more than MAX_MEMBERS members is an InputError naming
the tarball and the member; then the kept members are extracted with Python's `data` filter as a second guard.
A single top folder (`git archive --prefix`, GitHub's `<name>-<commit>/`) is stripped; `.git` folders are
dropped. Tests may lower the caps (module constants, read at each call).
"""

from __future__ import annotations

import posixpath
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.core.errors import InputError

SUFFIXES = (".tar.gz", ".tgz", ".tar")
MAX_MEMBER_BYTES = 4 * 2**30  # one file of a repository: 4 GiB
MAX_TREE_BYTES = 16 * 2**30  # all of it: 16 GiB
MAX_MEMBERS = 500_000
MAX_DEPTH = 64  # folders deep: a real repository is far shallower; thousands exhaust recursion and path limits


def is_tarball(path: Path) -> bool:
    """Whether `path` is named like a tarball this cache reads."""
    return path.name.lower().endswith(SUFFIXES)


@dataclass
class Unpacked:
    """What unpacking kept and left out."""

    files: int = 0
    stripped: str | None = None
    dropped_git: list[str] = field(default_factory=list)


def _refuse(tarball: Path, member: str, why: str) -> InputError:
    return InputError(f"member {member[:300]!r} {why}; nothing was unpacked", path=str(tarball),
                      hint="a repository tarball holds files, folders and links inside its own tree only")


def _check_name(tarball: Path, name: str) -> list[str]:
    if "\x00" in name or not name.strip():
        raise _refuse(tarball, name, "has an empty or NUL-holding name")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise _refuse(tarball, name, "has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _refuse(tarball, name, "leads outside the tree ('..')")
    if len(parts) > MAX_DEPTH:
        raise _refuse(tarball, name, f"is {len(parts)} levels deep, past the limit of {MAX_DEPTH}")
    return parts


def _members(tar: tarfile.TarFile, tarball: Path) -> list[tuple[tarfile.TarInfo, list[str]]]:
    """Every member with its path parts, checked for names, kinds and sizes."""
    members, total = [], 0
    for member in tar:
        if len(members) >= MAX_MEMBERS:
            raise _refuse(tarball, member.name, f"is past the limit of {MAX_MEMBERS:,} members")
        parts = _check_name(tarball, member.name)
        if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
            raise _refuse(tarball, member.name, "is a device file, FIFO or other special file")
        if member.size > MAX_MEMBER_BYTES:
            raise _refuse(tarball, member.name, f"is {member.size:,} bytes, over the limit of "
                                                f"{MAX_MEMBER_BYTES:,} for one file")
        total += member.size
        if total > MAX_TREE_BYTES:
            raise _refuse(tarball, member.name, f"brings the tree past the limit of {MAX_TREE_BYTES:,} bytes")
        if parts:
            members.append((member, parts))
    return members


def _top_folder(members: list[tuple[tarfile.TarInfo, list[str]]]) -> str | None:
    """The one folder every member lies in, if there is one (and it is a folder, not a file)."""
    tops = {parts[0] for _, parts in members}
    if len(tops) != 1:
        return None
    (top,) = tops
    only_top = [m for m, parts in members if len(parts) == 1]
    return top if all(m.isdir() for m in only_top) and any(len(p) > 1 for _, p in members) else None


def _check_link(tarball: Path, member: tarfile.TarInfo, rel: str, kept: set[str], strip: str | None) -> str:
    """The link's target as it will be written; InputError when it is absolute or leads out of the tree."""
    target = member.linkname
    if not target or "\x00" in target or target.startswith("/") or (len(target) > 1 and target[1] == ":"):
        raise _refuse(tarball, member.name, f"links to the absolute path {target!r}")
    if member.issym():
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if resolved == ".." or resolved.startswith("../"):
            raise _refuse(tarball, member.name, f"links to {target!r}, outside the tree")
        return target
    parts = _check_name(tarball, target)  # a hard link names another member of the archive
    if strip is not None:
        if parts[:1] != [strip]:
            raise _refuse(tarball, member.name, f"hard-links to {target!r}, outside the tree")
        parts = parts[1:]
    linked = "/".join(parts)
    if linked not in kept:
        raise _refuse(tarball, member.name, f"hard-links to {target!r}, which is not a file before it in the tree")
    return linked


def unpack(tarball: Path, dest: Path) -> Unpacked:
    """Unpack the repository `tarball` into the new folder `dest` (see the module's docstring). InputError
    naming the tarball and member for a hostile or unreadable tarball; `dest` may then hold a partial tree, which
    the caller removes."""
    report = Unpacked()
    try:
        with tarfile.open(tarball, "r:*") as tar:
            members = _members(tar, tarball)
            report.stripped = _top_folder(members)
            kept_names: set[str] = set()
            kept: list[tarfile.TarInfo] = []
            for member, parts in members:
                rel_parts = parts[1:] if report.stripped else parts
                if not rel_parts:
                    continue
                if ".git" in rel_parts:
                    report.dropped_git.append(member.name)
                    continue
                rel = "/".join(rel_parts)
                changes: dict[str, str] = {"name": rel}
                if member.issym() or member.islnk():
                    changes["linkname"] = _check_link(tarball, member, rel, kept_names, report.stripped)
                kept.append(member.replace(**changes, deep=False))
                if member.isreg():
                    kept_names.add(rel)
                    report.files += 1
            dest.mkdir(parents=True)
            tar.extractall(dest, members=kept, filter="data")
    except tarfile.FilterError as exc:
        name = exc.tarinfo.name if exc.tarinfo is not None else "?"
        raise _refuse(tarball, name, f"is refused by the data filter ({exc})") from exc
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(f"cannot unpack the tarball: {exc}", path=str(tarball)) from exc
    return report

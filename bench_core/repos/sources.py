"""Where a repository comes from, and how its tree at a pinned commit is made in a staging folder.

Four kinds of source: `git` (a URL, or the path of a bare repository: cloned with `git clone`), `checkout` (a
local working copy: its HEAD's tree, cloned from it; uncommitted changes are not part of a commit, so not of the
pin), `folder` (a plain folder, copied) and `tarball` (`.tar.gz`, `.tgz`, `.tar`, unpacked safely). The pin:
git's HEAD (or `--commit`) for the first two; for a tarball the commit `git archive` wrote in it (read with `git
get-tar-commit-id`), else `--commit`; for a folder `--commit`; otherwise a hash of the content,
`tree-sha256:<hex>`. The cache keeps the tree only: `.git` is never copied, links leading out are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.repos import git, tarballs, trees
from failatlas.bench_core.repos.cache import CommitFrom, SourceKind
from failatlas.bench_core.repos.urls import clone_url, is_local, local_path, normalise_url
from failatlas.core.errors import InputError

REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")  # a commit, tag or branch to check out
HEX_COMMIT = re.compile(r"[0-9a-f]{7,64}")
_OWNER_NAME = re.compile(r"(?P<owner>[A-Za-z0-9][A-Za-z0-9-]*)__(?P<name>[A-Za-z0-9._-]+)")


@dataclass(frozen=True)
class Source:
    """A repository source: its kind, where it is (a URL, or an absolute path) and its display name."""

    kind: SourceKind
    location: str

    @property
    def name(self) -> str:
        """The last part of the location without `.git` or a tarball suffix (`ml-calibration`)."""
        last = self.location.rstrip("/").rsplit("/", 1)[-1]
        for suffix in (*tarballs.SUFFIXES, ".git"):
            if last.lower().endswith(suffix):
                return last[: -len(suffix)]
        return last


@dataclass
class Obtained:
    """A tree made in a staging folder, its pin and what the user should know about it."""

    tree: Path
    commit: str
    commit_from: CommitFrom
    notes: list[str] = field(default_factory=list)


def classify(text: str) -> Source:
    """The kind of `text`: an existing tarball, bare repository, checkout or folder by path; else a git URL.
    InputError when it is neither an existing file or folder nor a repository URL."""
    if text.lower().startswith("file://"):
        return Source("git", "file://" + local_path(text))
    path = Path(text).expanduser()
    if path.exists():
        resolved = str(path.resolve())
        if path.is_file():
            if not tarballs.is_tarball(path):
                raise InputError("is a file but not a tarball (.tar.gz, .tgz, .tar)", path=text)
            return Source("tarball", resolved)
        if git.is_bare(path):
            return Source("git", resolved)
        if (path / ".git").exists():
            return Source("checkout", resolved)
        return Source("folder", resolved)
    if is_local(text):
        raise InputError("no such file or folder", path=text)
    normalise_url(text)  # InputError when it is not a repository URL either
    return Source("git", text.strip())


def check_commit(source: Source, commit: str | None) -> str | None:
    """`commit` (`--commit`) checked: a ref git can check out for a git source or checkout, a hexadecimal
    commit id (7 to 64 characters) for a folder or tarball, whose pin it only names. InputError otherwise."""
    if commit is None:
        return None
    if source.kind in ("git", "checkout"):
        if not REF.fullmatch(commit) or ".." in commit:
            raise InputError(f"{commit!r} is not a commit, tag or branch name", field="commit")
        return commit
    if not HEX_COMMIT.fullmatch(commit.lower()):
        raise InputError(f"{commit!r} is not a commit id (7 to 64 hexadecimal characters)", field="commit")
    return commit.lower()


def default_url(source: Source) -> str | None:
    """The URL a source stands for when none is given: the clone URL of a git source, the `origin` remote of a
    checkout; None for a folder or tarball (see `tarball_url`)."""
    if source.kind == "git":
        return source.location
    if source.kind == "checkout":
        origin = git.origin_url(Path(source.location))
        relative = Path(source.location) / origin if origin and not is_local(origin) else None
        if relative is not None and "://" not in origin and relative.exists():
            return str(relative.resolve())  # a remote named relative to the checkout
        return origin
    return None


def tarball_url(source: Source) -> str | None:
    """`github.com/<owner>/<name>` for a tarball named `<owner>__<name>.tar.gz`; None for other names."""
    match = _OWNER_NAME.fullmatch(source.name) if source.kind == "tarball" else None
    return f"github.com/{match['owner']}/{match['name']}" if match else None


def known_pin(source: Source, commit: str | None) -> str | None:
    """The commit the pin will be, when it can be told before copying anything (a tarball's header, a full
    commit id given, a checkout's HEAD, a remote's HEAD); None otherwise. Lets a re-add of a cached pin do
    nothing."""
    if source.kind == "tarball":
        return tarball_commit(source, commit)
    if commit is not None and git.COMMIT.fullmatch(commit):
        return commit
    if source.kind == "checkout":
        return git.rev_parse(Path(source.location), commit or "HEAD")
    if source.kind == "git" and commit is None:
        local = is_local(source.location) or Path(source.location).is_absolute()
        return git.remote_head(_clone_from(source), local=local)
    return None


def tarball_commit(source: Source, commit: str | None) -> str | None:
    """The tarball's own commit, else `commit`; InputError when both are there and differ."""
    own = git.tar_commit(Path(source.location))
    if own and commit and not own.startswith(commit):
        raise InputError(f"the tarball was made from commit {own}, not {commit}", path=source.location,
                         field="commit")
    return own or commit


def _clone_from(source: Source) -> str:
    location = source.location
    if Path(location).is_absolute():
        return "file://" + location
    return clone_url(location, allow_local=True)


def obtain(source: Source, staging: Path, commit: str | None, *, timeout: float = git.CLONE_TIMEOUT_S) -> Obtained:
    """Make the tree of `source` at its pin in `staging/tree` (see the module's docstring). InputError for a bad
    source or tarball, GitFailed when git fails."""
    tree = staging / "tree"
    notes: list[str] = []
    if source.kind in ("git", "checkout"):
        local = source.kind == "checkout" or _clone_from(source).startswith("file://")
        # a checkout's branches are only remote branches in its clone: name the commit itself
        wanted = git.rev_parse(Path(source.location), commit or "HEAD") if source.kind == "checkout" else commit
        pinned = git.clone(_clone_from(source), tree, commit=wanted, local=local, timeout=timeout)
        trees.remove_git(tree)
        if source.kind == "checkout":
            notes.append(f"cached the tree of commit {pinned[:12]} of the checkout; uncommitted changes are not "
                         "part of it")
        found: Obtained = Obtained(tree, pinned, "given" if commit else "head", notes)
    elif source.kind == "tarball":
        pin = tarball_commit(source, commit)
        report = tarballs.unpack(Path(source.location), tree)
        if report.dropped_git:
            notes.append(f"dropped {len(report.dropped_git)} member(s) under .git")
        from_header = git.tar_commit(Path(source.location)) is not None
        found = Obtained(tree, pin or "", "tar-header" if from_header else "given", notes)
    else:
        trees.copy_folder(Path(source.location), tree)
        found = Obtained(tree, commit or "", "given", notes)
    dropped = trees.drop_outside_links(tree)
    if dropped:
        notes.append(f"dropped {len(dropped)} link(s) leading outside the repository: {', '.join(dropped[:5])}")
    if not found.commit:
        found.commit, found.commit_from = trees.tree_hash(tree), "tree-sha256"
        notes.append(f"no commit names this tree: pinned by its content hash {found.commit[:24]}...; pass --commit "
                     "to name its commit")
    return found

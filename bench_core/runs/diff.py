"""The agent's changes as a git diff: from the prepared (masked) tree to the tree the agent left.

Both trees are hashed, byte for byte, into a private bare repository and compared with `git diff-tree`, so the diff
applies with `git apply` whatever the change: added, empty, deleted, renamed (a deletion and an addition, so the
new file's content is always in the diff), binary, mode-changed files and symlinks. Nothing in the trees steers
git: filters and the agent's `.gitattributes` and `.gitignore` are not read, the user's git config is not either,
and `.git` folders (nested repositories included), the harness's output folder and Python caches are left out.
Files that are not UTF-8 are diffed as binary patches, so the diff stays exact once it is stored as text.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import zlib
from pathlib import Path

from failatlas.bench_core.agents.base import OUTPUT_DIR

IGNORED_NAMES = frozenset({".git", OUTPUT_DIR, "__pycache__"})
# a `.pyc` outside `__pycache__` is no cache: Python imports it as a module where no source stands beside it (a
# `json.pyc` or `pytest.pyc` beside a check shadows the real one), so it is part of the diff
IGNORED_SUFFIXES: tuple[str, ...] = ()
_IGNORED_BYTES = frozenset(os.fsencode(n) for n in IGNORED_NAMES)
_IGNORED_SUFFIX_BYTES = tuple(os.fsencode(s) for s in IGNORED_SUFFIXES)
_ARGV_BYTES = 64 * 1024


class _Repo:
    """A throwaway bare repository whose objects are the trees' blobs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.git_dir = root / "objects.git"
        self._indexes = 0
        self.quote_paths = False
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env = {**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_DIR": str(self.git_dir)}
        self.run("init", "--quiet", "--bare", "--template=", str(self.git_dir))

    def run(self, *args: str | bytes, input: bytes | None = None, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> bytes:
        git = shutil.which("git")
        if git is None:
            raise RuntimeError("git is not installed; it is needed to diff the agent's changes")
        quote = f"core.quotepath={'true' if self.quote_paths else 'false'}"
        proc = subprocess.run([git, "-c", quote, *args], input=input, cwd=cwd or self.root,
                              env={**self.env, **(env or {})}, capture_output=True, check=False)
        if proc.returncode != 0:
            shown = " ".join(a if isinstance(a, str) else os.fsdecode(a) for a in args[:3])
            raise RuntimeError(f"git {shown} failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def blob(self, data: bytes) -> str:
        """Store a small blob (a link's target) and return its id."""
        header = b"blob %d\0" % len(data)
        sha = hashlib.sha1(header + data, usedforsecurity=False).hexdigest()
        path = self.git_dir / "objects" / sha[:2] / sha[2:]
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(zlib.compress(header + data))
        return sha

    def hash_files(self, root: Path, paths: list[bytes]) -> list[str]:
        """Store the files (paths relative to `root`) exactly as their bytes are, streamed by git."""
        shas: list[str] = []
        start = 0
        while start < len(paths):
            end, size = start, 0
            while end < len(paths) and (end == start or size + len(paths[end]) < _ARGV_BYTES):
                size += len(paths[end]) + 1
                end += 1
            out = self.run("hash-object", "-w", "--no-filters", "--", *paths[start:end], cwd=root)
            shas += out.decode().split()
            start = end
        return shas

    def tree(self, entries: dict[bytes, tuple[str, str]]) -> str:
        """The id of the tree holding `entries` (path -> (mode, blob id))."""
        self._indexes += 1
        index = self.root / f"index-{self._indexes}"
        info = b"".join(f"{mode} {sha}\t".encode() + path + b"\0" for path, (mode, sha) in sorted(entries.items()))
        env = {"GIT_INDEX_FILE": str(index)}
        if info:
            self.run("update-index", "-z", "--index-info", input=info, env=env)
        return self.run("write-tree", env=env).decode().strip()


def _entries(repo: _Repo, root: Path) -> dict[bytes, tuple[str, str]]:
    """path -> (git mode, blob id) of every regular file and symlink under `root`; other kinds are left out."""
    files: list[bytes] = []
    modes: dict[bytes, str] = {}
    entries: dict[bytes, tuple[str, str]] = {}
    base = os.fsencode(root)
    for folder, dirs, names in os.walk(base):
        rel = os.path.relpath(folder, base)
        prefix = b"" if rel == b"." else rel + b"/"
        keep = []
        for name in sorted(dirs) + sorted(names):
            if name in _IGNORED_BYTES or name.endswith(_IGNORED_SUFFIX_BYTES):
                continue
            info = os.lstat(os.path.join(folder, name))
            if stat.S_ISLNK(info.st_mode):
                entries[prefix + name] = ("120000", repo.blob(os.readlink(os.path.join(folder, name))))
            elif stat.S_ISDIR(info.st_mode):
                keep.append(name)
            elif stat.S_ISREG(info.st_mode):
                files.append(prefix + name)
                modes[prefix + name] = "100755" if info.st_mode & stat.S_IXUSR else "100644"
        dirs[:] = keep
    for path, sha in zip(files, repo.hash_files(root, files), strict=True):
        entries[path] = (modes[path], sha)
    return entries



def _is_utf8(path: Path) -> bool:
    if not path.is_file() or path.is_symlink():
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                decoder.decode(chunk)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _patch(repo: _Repo, a: str, b: str, *, binary: bool) -> bytes:
    args = ["diff-tree", "-r", "-p", "--binary", "--full-index", "--no-renames", "--no-color", "--no-ext-diff",
            "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/", a, b]
    if binary:  # every file of this pass as a binary patch: `-diff` marks a path as binary
        attributes = repo.root / "binary.attributes"
        attributes.write_text("* -diff\n")
        args = ["-c", f"core.attributesFile={attributes}", *args]
    return repo.run(*args)


def _patches(repo: _Repo, old: dict, new: dict, not_text: set[bytes]) -> bytes:
    """The text patch of the UTF-8 files, then the binary patch of the others."""
    out = _patch(repo, repo.tree({p: e for p, e in old.items() if p not in not_text}),
                 repo.tree({p: e for p, e in new.items() if p not in not_text}), binary=False)
    if not_text:
        out += _patch(repo, repo.tree({p: e for p, e in old.items() if p in not_text}),
                      repo.tree({p: e for p, e in new.items() if p in not_text}), binary=True)
    return out


def tree_diff(before: Path, after: Path) -> tuple[str, list[str]]:
    """A git diff from `before` to `after` that `git apply` (in `before`) turns into `after`, and the paths it
    changes (added, modified, deleted; a rename is both paths). Raises RuntimeError when git fails."""
    with tempfile.TemporaryDirectory(prefix="failatlas-diff-") as tmp:
        repo = _Repo(Path(tmp))
        old, new = _entries(repo, Path(before)), _entries(repo, Path(after))
        changed = sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
        not_text = {p for p in changed
                    if not (_is_utf8(Path(before) / os.fsdecode(p)) and _is_utf8(Path(after) / os.fsdecode(p)))}
        try:
            diff = _patches(repo, old, new, not_text).decode("utf-8")
        except UnicodeDecodeError:  # a path or a link target that is not UTF-8: git quotes such paths when asked
            repo.quote_paths = True
            diff = _patches(repo, old, new, not_text).decode("utf-8", errors="replace")
        return diff, [p.decode("utf-8", errors="replace") for p in changed]

"""A fresh git repository with one reproducible commit, and a reader of every object it holds."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from failatlas.core.errors import InfrastructureError

COMMIT_DATE = "2000-01-01T00:00:00+0000"
COMMIT_AUTHOR = ("FailAtlas", "failatlas@localhost")
COMMIT_MESSAGE = "Initial commit"


def _git_env() -> dict[str, str]:
    """Environment that ignores the user's and the system's git config (hooks, signing, templates)."""
    name, email = COMMIT_AUTHOR
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email,
        GIT_COMMITTER_NAME=name,
        GIT_COMMITTER_EMAIL=email,
        GIT_AUTHOR_DATE=COMMIT_DATE,
        GIT_COMMITTER_DATE=COMMIT_DATE,
    )
    return env


def git(path: Path, *args: str, input: bytes | None = None) -> bytes:
    """Run git in `path`; raise InfrastructureError when git is missing or fails."""
    executable = shutil.which("git")
    if executable is None:
        raise InfrastructureError("git is not installed", hint="install git to prepare task workspaces")
    result = subprocess.run(
        [executable, *args], cwd=path, env=_git_env(), input=input, capture_output=True, check=False
    )
    if result.returncode != 0:
        stderr = result.stderr.decode(errors="replace").strip()
        raise InfrastructureError(f"git {' '.join(args)} failed in {path}: {stderr}")
    return result.stdout


def init_single_commit(path: Path) -> str:
    """Make `path` a new repository whose only commit holds every file in it; return the commit id.

    Author, committer, dates and message are fixed, so the same tree always gives the same commit id.
    """
    git(path, "init", "--quiet", "--initial-branch=main", "--template=")
    git(path, "add", "--all", "--force")
    git(path, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "--allow-empty", "-m", COMMIT_MESSAGE)
    return _head(path)


def _head(path: Path) -> str:
    """The commit id HEAD names, read from the new repository's files (a `git rev-parse HEAD` process costs more
    than the read, on a busy machine many times more); from git itself where the files are not as `git init`
    lays them out."""
    dot_git = path / ".git"
    try:
        ref = (dot_git / "HEAD").read_text().strip()
        if ref.startswith("ref: refs/heads/") and ".." not in ref:
            commit = (dot_git / ref[len("ref: "):]).read_text().strip()
            if len(commit) in (40, 64) and all(c in "0123456789abcdef" for c in commit):
                return commit
    except OSError:
        pass
    return git(path, "rev-parse", "HEAD").decode().strip()


def iter_objects(path: Path) -> Iterator[tuple[str, str, bytes]]:
    """(object id, type, content) for every object in the repository's database, reachable or not.

    Streams from one `git cat-file --batch-all-objects --batch`, so large repositories are not held in memory.
    """
    executable = shutil.which("git")
    if executable is None:
        raise InfrastructureError("git is not installed", hint="install git to prepare task workspaces")
    command = [executable, "cat-file", "--batch-all-objects", "--batch"]
    with subprocess.Popen(command, cwd=path, env=_git_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as process:
        assert process.stdout is not None
        while header := process.stdout.readline():
            oid, kind, size = header.decode().split()
            content = process.stdout.read(int(size))
            process.stdout.read(1)
            yield oid, kind, content
    if process.returncode != 0:
        raise InfrastructureError(f"git cat-file failed in {path}")

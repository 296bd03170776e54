"""git as a subprocess: clone a repository at a commit, read HEAD and remotes, read a `git archive` tarball's
commit.

git never prompts (a private or missing repository fails at once, with git's own reason) and may use only the
transports named for the call: https, http, ssh and git, plus file for a repository on this machine; `ext::`
and other remote helpers never. A failure is `GitFailed` (an InfrastructureError: the network or the remote,
not the input, is usually at fault) whose `reason` is git's message.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
from pathlib import Path

from failatlas.bench_core.repos.urls import without_credentials
from failatlas.core.errors import ConfigError, InfrastructureError, InputError

CLONE_TIMEOUT_S = 1800
QUICK_TIMEOUT_S = 120
NETWORK_PROTOCOLS = ("https", "http", "ssh", "git")
COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
TAR_HEADER_BYTES = 1024  # what `git get-tar-commit-id` reads: the pax global header `git archive` writes first
_QUIET_ENV = {"GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never", "GIT_ASKPASS": "true",
              "SSH_ASKPASS": "true", "LC_ALL": "C"}


class GitFailed(InfrastructureError):
    """A git command failed; `reason` is what git said."""

    def __init__(self, what: str, reason: str) -> None:
        what, reason = without_credentials(what), without_credentials(reason)  # printed and stored: no passwords
        super().__init__(f"{what}: {reason}")
        self.reason = reason


def _reason(stderr: str) -> str:
    """git's own explanation: its `fatal:`/`error:` lines, else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    picked = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines[-1:]
    return " ".join(picked)[:500] or "git failed without saying why"


def _protocols(local: bool) -> list[str]:
    allowed = [*NETWORK_PROTOCOLS, *(("file",) if local else ())]
    return ["-c", "protocol.allow=never", *(arg for p in allowed for arg in ("-c", f"protocol.{p}.allow=always"))]


def git(*args: str, cwd: Path | None = None, timeout: float = QUICK_TIMEOUT_S, input: bytes | None = None,
        what: str | None = None) -> str:
    """Run `git args...` quietly and return its stdout. GitFailed with git's reason when it fails or outlasts
    `timeout`; ConfigError when git is not installed."""
    env = {**os.environ, **_QUIET_ENV}
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")  # never ask for a password or a host key
    try:
        done = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, timeout=timeout, env=env,
                              stdin=None if input is not None else subprocess.DEVNULL, check=False)
    except FileNotFoundError as exc:
        raise ConfigError("git is not installed", hint="install git to add or fetch repositories") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitFailed(what or f"git {args[0]}", f"took longer than {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise GitFailed(what or f"git {args[0]}", _reason(done.stderr.decode("utf-8", "replace")))
    return done.stdout.decode("utf-8", "replace")


def clone(url: str, dest: Path, *, commit: str | None = None, local: bool = False,
          timeout: float = CLONE_TIMEOUT_S) -> str:
    """Clone `url` into `dest` (without submodules) and check out `commit` (default: the remote's HEAD); returns
    the commit checked out. Only the latest commit is fetched unless `commit` is named. GitFailed naming the URL
    when git fails or `commit` is not in the repository."""
    depth = [] if commit or local else ["--depth", "1"]
    git(*_protocols(local), "clone", "--quiet", "--no-recurse-submodules", *depth, "--", url, str(dest),
        timeout=timeout, what=f"cloning {url}")
    if commit:
        git("-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", f"{commit}^{{commit}}", "--",
            cwd=dest, what=f"checking out {commit} of {url}")
    return rev_parse(dest)


def rev_parse(repo: Path, rev: str = "HEAD") -> str:
    """The full commit id `rev` names in the repository at `repo`; GitFailed when it names none."""
    if rev.startswith("-"):
        raise InputError(f"{rev!r} is not a commit", field="commit")
    return git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=repo,
               what=f"finding commit {rev} in {repo}").strip()


def remote_head(url: str, *, local: bool = False, timeout: float = QUICK_TIMEOUT_S) -> str | None:
    """The commit the remote's HEAD points at, asked without cloning; None when the remote does not say."""
    out = git(*_protocols(local), "ls-remote", "--", url, "HEAD", timeout=timeout, what=f"asking {url} for HEAD")
    first = out.split()[:1]
    return first[0] if first and COMMIT.fullmatch(first[0]) else None


def origin_url(repo: Path) -> str | None:
    """The `origin` remote's URL of the checkout at `repo`, or None when it has none."""
    try:
        return git("remote", "get-url", "origin", cwd=repo).strip() or None
    except GitFailed:
        return None


def is_bare(path: Path) -> bool:
    """Whether the folder `path` is itself a bare repository (not a folder inside one)."""
    if not ((path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()):
        return False
    try:
        return git("rev-parse", "--is-bare-repository", cwd=path).strip() == "true"
    except GitFailed:
        return False


def tar_commit(tarball: Path) -> str | None:
    """The commit a `git archive` tarball was made from, as `git get-tar-commit-id` reads it from the tarball's
    pax header; None when the tarball has none (it was not made by `git archive`, or from a tree, not a
    commit). InputError naming the tarball when it cannot be read."""
    try:
        opener = gzip.open if tarball.name.lower().endswith((".gz", ".tgz")) else open
        with opener(tarball, "rb") as handle:
            head = handle.read(TAR_HEADER_BYTES)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read the tarball: {exc}", path=str(tarball)) from exc
    try:
        found = git("get-tar-commit-id", input=head).strip()
    except GitFailed:
        return None
    return found if COMMIT.fullmatch(found) else None

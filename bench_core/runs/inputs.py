"""What a run is made from beyond its key: the repository it used, the resources after the user's overrides, and
the fingerprint of those inputs that decides whether a stored `infra_error` run is redone.

The repository of a task is resolved once, in the parent process (workers never open the store): the explicit
`--repo` checkout, else the repository cache's checkout of the task's repository, else the task's bundled folder.
A task with none is not run: its inputs are missing, which is neither the agent's failure nor the harness's, and
nothing is stored, so the run simply happens once the repository is there.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from failatlas.bench_core.runs.data import DataInput
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InfrastructureError, InputError

if TYPE_CHECKING:
    from failatlas.bench_core.repos import CachedRepo

RepoSource = Literal["option", "cache", "bundled"]


class ResourceOverrides(BaseModel):
    """`bench run --gpus/--memory/--timeout/--environment`: replace the task's declared resources for these runs
    (None keeps the task's). `timeout_s` is the experiment's time limit (`resources.time_limit_s` and
    `run.timeout_s`)."""

    model_config = ConfigDict(extra="forbid")

    gpus: int | None = Field(default=None, ge=0)
    memory_gb: float | None = Field(default=None, gt=0)
    timeout_s: int | None = Field(default=None, ge=1)
    environment: Literal["agent", "prebuilt"] | None = None

    def apply(self, task: TaskSpec) -> TaskSpec:
        """`task` with these overrides in its resources (the same object when there are none)."""
        resources: dict[str, Any] = {}
        if self.gpus is not None:
            resources["gpus"] = self.gpus
        if self.memory_gb is not None:
            resources["memory_gb"] = self.memory_gb
        if self.timeout_s is not None:
            resources["time_limit_s"] = self.timeout_s
        if self.environment is not None:
            resources["environment"] = self.environment
        if not resources:
            return task
        update: dict[str, Any] = {"resources": task.resources.model_copy(update=resources)}
        if self.timeout_s is not None:
            update["run"] = task.run.model_copy(update={"timeout_s": self.timeout_s})
        return task.model_copy(update=update)


class RepoUsed(BaseModel):
    """The repository a run is prepared from. `path` is None for the task's bundled folder (prepare finds it
    beside the task file); `url` and `commit` are what the run records (None when unknown)."""

    source: RepoSource
    path: Path | None = None
    url: str | None = None
    commit: str | None = None


def git_head(path: Path) -> str | None:
    """The commit checked out at `path` when `path` is the top of a git checkout (a folder inside some other
    repository, say a bundled one, is not: its HEAD would describe the wrong tree); None otherwise."""
    from failatlas.bench_core.prepare.gitrepo import git

    root = Path(path).resolve()
    if not (root / ".git").exists():
        return None
    try:
        out = git(root, "-c", f"safe.directory={root}", "rev-parse", "--show-toplevel", "HEAD").decode().split()
    except InfrastructureError:  # not a repository after all, no commit yet, or git missing: commit unknown
        return None
    if len(out) != 2 or Path(out[0]).resolve() != root:
        return None
    return out[1]


def repository_of(task: TaskSpec, *, repo: Path | None = None, cached: CachedRepo | None = None) -> RepoUsed | None:
    """The repository `task` is prepared from: `repo` (the user's checkout), else `cached` (the repository
    cache's checkout), else the task's bundled folder when it is there; None when there is none."""
    if repo is not None:
        path = Path(repo).resolve()
        return RepoUsed(source="option", path=path, url=str(path), commit=git_head(path))
    if cached is not None:
        return RepoUsed(source="cache", path=Path(cached.path), url=cached.url, commit=cached.commit)
    if task.repository.local_path and _bundled_present(task):
        return RepoUsed(source="bundled", url=task.repository.url, commit=task.repository.commit)
    return None


def _bundled_present(task: TaskSpec) -> bool:
    """Whether the task's bundled folder exists (a path that leaves the task's folder counts as present: preparing
    the task then fails with the error that names it)."""
    from failatlas.bench_core.prepare.leaks import task_path

    try:
        return task_path(task, task.repository.local_path or "", field="repository.local_path").is_dir()
    except InputError:
        return True


def unavailable(task: TaskSpec) -> str:
    """The one-line reason a task without a repository is not run."""
    if task.repository.url:
        return f"repository not available: {task.repository.url}; add it with `failatlas repos add`"
    if task.repository.local_path:
        return (f"repository not available: its bundled copy {task.repository.local_path} is missing; pass its "
                "checkout with --repo")
    return (f"repository not available: the task names none; add its checkout with `failatlas repos add PATH "
            f"--task {task.id}`, or pass --repo")


class RunInputs(BaseModel):
    """Everything outside the run's key that a run depends on: the repository (URL and commit), the image, the
    sandbox kind, the sandbox's resources after overrides, and the agent's budget. Stored on the run with its
    `fingerprint`; a stored `infra_error` run whose fingerprint differs from a new run's is redone."""

    model_config = ConfigDict(extra="forbid")

    repo_url: str | None
    repo_commit: str | None
    image: str | None  # the image the run's root was (None: it ran on no image: `root` says on what)
    sandbox: str
    resources: dict[str, Any]
    budget: dict[str, Any]
    # the network policy the sandbox had (none | registries | full), the hosts `registries` allowed, the CA bundle
    # given to it (path and sha256, never its contents) and who set up the environment (agent | prebuilt)
    network: str = "none"
    allow_hosts: list[str] = Field(default_factory=list)
    ca_bundle: dict[str, str] | None = None
    environment: str = "agent"
    # what the sandbox's root was (`SandboxKind.root`): `image NAME`, `host`, `root filesystem PATH`; None for runs
    # stored before it was recorded
    root: str | None = None
    # the data inputs mounted at /data/NAME (runs/data.py), each with its path and fingerprint
    data: dict[str, DataInput] = Field(default_factory=dict)
    # a prebuilt environment built as a venv (bwrap runs): its host folder, named by the spec's hash (venvs.py)
    env_dir: str | None = None

    @property
    def fingerprint(self) -> str:
        # without data inputs or a venv the key is what it was before they existed, so stored runs keep their
        # fingerprints
        left = {name for name in ("data", "env_dir") if not getattr(self, name)}
        if self.root is None or self.root.startswith("image "):  # an image's root: the image is in the key already
            left.add("root")
        key = json.dumps(self.model_dump(mode="json", exclude=left or None), sort_keys=True,
                         separators=(",", ":"))
        return hashlib.sha256(key.encode()).hexdigest()[:16]

"""Real git repositories made in tmp_path, real tasks imported from the shared data, a real store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from failatlas.bench_core.tasks import TaskImportParams
from failatlas.bench_core.tasks import run as import_tasks


@pytest.fixture(autouse=True)
def git_identity(monkeypatch):
    """Commits made by the tests need an author; nothing of the user's git configuration is read."""
    for key, value in {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
                       "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": "/dev/null",
                       "GIT_CONFIG_NOSYSTEM": "1"}.items():
        monkeypatch.setenv(key, value)


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


class Upstream:
    """A bare repository with a working clone to commit to: the remote a test clones from."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "upstream.git"
        self.work = root / "work"
        git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare))
        git("clone", "--quiet", str(self.bare), str(self.work))
        git("checkout", "--quiet", "-b", "main", cwd=self.work)

    def commit(self, files: dict[str, str], message: str = "change") -> str:
        for name, text in files.items():
            path = self.work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git("add", "--all", cwd=self.work)
        git("commit", "--quiet", "-m", message, cwd=self.work)
        git("push", "--quiet", "origin", "main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path / "remote")


@pytest.fixture
def expbench_store(store, shared_data: Path):
    """A store holding the 206 real EXP-Bench ICLR 2024 tasks, repositories named by the real index."""
    import_tasks(store, TaskImportParams(paths=[shared_data / "expbench" / "iclr2024"]))
    return store


@pytest.fixture(scope="session")
def repos_data(shared_data: Path) -> Path:
    return shared_data / "repos"

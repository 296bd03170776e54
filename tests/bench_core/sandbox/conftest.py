from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.sandbox.docker_sandbox import DockerSandbox


@pytest.fixture
def run_id() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small prepared repository, as the runner would hand it over."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text("print('training')\n")
    (root / "README.md").write_text("# toy\n")
    return root


@pytest.fixture(scope="module")
def shared_box(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerSandbox]:
    """One container for the tests that do not break it."""
    repo = tmp_path_factory.mktemp("shared") / "repo"
    repo.mkdir()
    (repo / "hello.txt").write_text("hello\n")
    box = create_sandbox("docker", SandboxSpec(image=sandbox_image, memory_mb=512, pids_limit=64,
                                               run_id="test-shared"), workspace=repo)
    yield box
    box.close()


@pytest.fixture(scope="session")
def bwrap_works() -> None:
    """bwrap tests fail, never skip, where bubblewrap cannot run: scripts/setup.sh installs it."""
    from failatlas.bench_core.sandbox.bwrap_setup import bwrap_problem

    problem = bwrap_problem()
    if problem is not None:
        pytest.fail(f"bwrap sandboxes cannot run here ({problem}): run scripts/setup.sh")

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("FAILATLAS_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def require_extra(extra: str, *distributions: str) -> None:
    """Skip the calling test, naming the optional extra to install, when a distribution of that extra is absent.
    `scripts/setup.sh` installs the base package only; `.ci/run` installs every extra, so in CI these tests run."""
    missing = []
    for name in distributions:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        pytest.skip(f"needs the optional '{extra}' extra ({', '.join(missing)} not installed): "
                    f"pip install -e '.[{extra}]' (.ci/run installs it)")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh, real DuckDB file per test."""
    return tmp_path / "store.duckdb"


@pytest.fixture
def store(db_path: Path):
    from failatlas.store import open_store

    return open_store(db_path)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        raise RuntimeError(f"the shared data folder {SHARED_DATA} is missing; set FAILATLAS_SHARED_DATA")
    return SHARED_DATA


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The real sandbox image; built once (minutes) when the tag is missing, reused afterwards."""
    from failatlas.bench_core.sandbox import DEFAULT_IMAGE, build_base_image

    build_base_image(DEFAULT_IMAGE)
    return DEFAULT_IMAGE


HARNESS_AGENTS = ("gold", "null", "fault-missing-component", "fault-wrong-constant", "fault-missing-package",
                  "fault-crash", "fault-no-conclusion", "fault-fabricated-results", "fault-peek")


@pytest.fixture(scope="session")
def scored_mini_store(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store in which every harness agent ran on every CPU task of the mini-suite, in Docker, and was
    scored offline. Built once per test session (a few minutes); tests that write must use `mini_store_copy`."""
    from failatlas.bench_core import runs, scoring
    from failatlas.bench_core.suites import load_suite
    from failatlas.bench_core.tasks import save_tasks
    from failatlas.store import open_store

    root = tmp_path_factory.mktemp("mini-runs")
    store = open_store(root / "mini.duckdb")
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    for agent in HARNESS_AGENTS:
        runs.run(store, runs.BenchParams(agent=agent, benchmark="failatlas-mini", runs_dir=root / "runs", workers=2,
                                         sandbox="docker", image=sandbox_image))
    scoring.run(store, scoring.ScoreParams(runs_dir=root / "runs", sandbox="docker", image=sandbox_image, workers=2))
    return store.path


@pytest.fixture
def mini_store_copy(scored_mini_store: Path, tmp_path: Path) -> Path:
    """A private copy of the scored mini-suite store."""
    import shutil

    target = tmp_path / "mini.duckdb"
    shutil.copy(scored_mini_store, target)
    return target

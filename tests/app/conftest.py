from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from failatlas.store import Store, open_store
from tests.app.fixture import fill_app_store


@pytest.fixture(scope="session")
def app_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("app") / "app.duckdb"
    taxonomy_id = fill_app_store(open_store(path))
    return path, taxonomy_id


@pytest.fixture
def app_db(app_template: tuple[Path, str], tmp_path: Path) -> Path:
    """A private copy of the filled store."""
    target = tmp_path / "app.duckdb"
    shutil.copy(app_template[0], target)
    return target


@pytest.fixture
def taxonomy_id(app_template: tuple[Path, str]) -> str:
    return app_template[1]


@pytest.fixture(scope="session")
def demo_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's store: every harness agent's real Docker runs of the mini-suite, scored, then mined by
    `failatlas demo` (which does only what is missing: insights, embeddings, clustering, taxonomy, exports). Built
    once per session; each test serves its own copy. $FAILATLAS_TEST_SCORED_STORE may name a store that
    `scored_mini_store` built before (runs and scores only), to skip the Docker runs when re-running these tests;
    $FAILATLAS_TEST_DEMO_STORE may name a store `failatlas demo` filled, used as it is (copied)."""
    from failatlas.demo import run_demo

    ready = os.environ.get("FAILATLAS_TEST_DEMO_STORE")
    if ready:
        folder = tmp_path_factory.mktemp("demo")
        shutil.copy(ready, folder / "demo.duckdb")
        return folder / "demo.duckdb"
    scored = os.environ.get("FAILATLAS_TEST_SCORED_STORE")
    source = Path(scored) if scored else request.getfixturevalue("scored_mini_store")
    folder = tmp_path_factory.mktemp("demo")
    shutil.copy(source, folder / "demo.duckdb")
    run_demo(Store(folder / "demo.duckdb"), out_dir=folder / "demo-out", sandbox="docker", say=lambda _line: None)
    return folder / "demo.duckdb"


@pytest.fixture
def demo_server(demo_store: Path, tmp_path: Path) -> str:
    from tests.app.test_e2e import _serve

    shutil.copy(demo_store, tmp_path / "demo.duckdb")
    yield from _serve(tmp_path / "demo.duckdb")

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from failatlas.store import open_store
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
    """The demo's store (the session's `demo_build`); each test serves its own copy. $FAILATLAS_TEST_DEMO_STORE
    may name a store `failatlas demo` filled, used as it is (copied) instead."""
    ready = os.environ.get("FAILATLAS_TEST_DEMO_STORE")
    if ready:
        folder = tmp_path_factory.mktemp("demo")
        shutil.copy(ready, folder / "demo.duckdb")
        return folder / "demo.duckdb"
    return request.getfixturevalue("demo_build").path


@pytest.fixture
def demo_server(demo_store: Path, tmp_path: Path) -> str:
    from tests.app.test_e2e import _serve

    shutil.copy(demo_store, tmp_path / "demo.duckdb")
    yield from _serve(tmp_path / "demo.duckdb")

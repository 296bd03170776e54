from __future__ import annotations

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

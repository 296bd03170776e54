from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("FAILATLAS_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


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

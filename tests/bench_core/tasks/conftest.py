from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="session")
def iclr2024(shared_data: Path) -> Path:
    return shared_data / "expbench" / "iclr2024"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def write_json(tmp_path: Path):
    """Write an object as JSON under tmp_path (sub-folders created) and return the path."""

    def write(name: str, data, *, raw: str | None = None) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(raw if raw is not None else json.dumps(data), encoding="utf-8")
        return path

    return write

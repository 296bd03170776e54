from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def table_snapshot(store) -> tuple[list[tuple], list[tuple]]:
    """Everything ingest stores, for asserting that a failed import changed nothing."""
    return (
        store.query("SELECT * FROM insights ORDER BY id"),
        store.query("SELECT * FROM insight_sources ORDER BY source_key"),
    )

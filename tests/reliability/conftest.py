"""The reliability table: each test records its row; at the end of the session the rows go to a JSON file
(test-artifacts/reliability.json) from which make_table.py writes docs/reliability.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.rows import ROWS

ARTIFACT = Path(__file__).resolve().parents[2] / "test-artifacts" / "reliability.json"
_RECORDED: dict[str, dict] = {}
_OUTCOMES: dict[str, str] = {}


class Table:
    """Where a test records its row: `table.record(row_id, observed, before=..., after=...)`."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def record(self, row_id: str, observed: str, *, before: int | None = None, after: int | None = None) -> None:
        if row_id not in ROWS:
            raise KeyError(f"row {row_id!r} is not in tests/reliability/rows.py")
        area, behaviour, expected = ROWS[row_id]
        _RECORDED[row_id] = {"id": row_id, "area": area, "behaviour": behaviour, "expected": expected,
                             "observed": observed, "rows_before": before, "rows_after": after,
                             "nodeid": self.nodeid}


@pytest.fixture
def table(request: pytest.FixtureRequest) -> Table:
    return Table(request.node.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and report.failed):
        _OUTCOMES[item.nodeid] = report.outcome


def pytest_sessionfinish(session, exitstatus):
    if not _RECORDED:
        return
    rows = []
    for row in _RECORDED.values():
        rows.append({**row, "status": "pass" if _OUTCOMES.get(row["nodeid"]) == "passed" else "FAIL"})
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(ARTIFACT.read_text()) if ARTIFACT.exists() else {}
    merged = {r["id"]: r for r in previous.get("rows", []) if r["id"] in ROWS}
    merged.update({r["id"]: r for r in rows})
    ARTIFACT.write_text(json.dumps({"rows": [merged[k] for k in ROWS if k in merged]}, indent=1))

"""The store's tables are the contract between stages: every table must be documented under docs/store/."""

from __future__ import annotations

import re
from pathlib import Path

from failatlas.store import open_store

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_table_is_documented(tmp_path):
    tables = set(open_store(tmp_path / "s.duckdb").tables())
    text = "\n".join(p.read_text() for p in sorted((DOCS / "store").glob("*.md")))
    headed = set(re.findall(r"^#+ .*?`([a-z0-9_]+)`", text, flags=re.M))
    missing = sorted(tables - headed)
    assert not missing, f"tables without a section in docs/store/*.md: {missing}"
    index = (DOCS / "STORE.md").read_text()
    assert not sorted(t for t in tables if f"`{t}`" not in index), "docs/STORE.md must list every table"

"""The store's tables are the contract between stages and what `failatlas db query` reads: every table must have a
section under docs/store/ and a line in docs/STORE.md, and every column of it a row in its section's column table."""

from __future__ import annotations

import re
from pathlib import Path

from failatlas.store import open_store

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _sections() -> dict[str, str]:
    """Each table named in a heading of docs/store/*.md -> the text under that heading (until the next one)."""
    out: dict[str, str] = {}
    for page in sorted((DOCS / "store").glob("*.md")):
        parts = re.split(r"(?m)^(#+ .*)$", page.read_text())
        for heading, body in zip(parts[1::2], parts[2::2], strict=True):
            for table in re.findall(r"`([a-z0-9_]+)`", heading):
                out[table] = out.get(table, "") + body
    return out


def _columns(tmp_path: Path) -> dict[str, list[str]]:
    store = open_store(tmp_path / "s.duckdb")
    with store.read() as conn:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position").fetchall()
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(table, []).append(column)
    return out


def test_every_table_is_documented(tmp_path):
    tables = set(_columns(tmp_path))
    missing = sorted(tables - set(_sections()))
    assert not missing, f"tables without a section in docs/store/*.md: {missing}"
    index = (DOCS / "STORE.md").read_text()
    assert not sorted(t for t in tables if f"`{t}`" not in index), "docs/STORE.md must list every table"


def test_every_column_is_documented(tmp_path):
    """A column is documented when the first cell of a row of its table's section names it ('run_id, seq' names
    both)."""
    sections = _sections()
    missing = {}
    for table, columns in _columns(tmp_path).items():
        named = {word for line in sections.get(table, "").splitlines() if line.startswith("|")
                 for word in re.findall(r"[a-z0-9_]+", line.split("|")[1])}
        if undocumented := [c for c in columns if c not in named]:
            missing[table] = undocumented
    assert not missing, f"columns without a row in their table's section of docs/store/*.md: {missing}"

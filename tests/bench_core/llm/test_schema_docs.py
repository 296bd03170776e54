from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "store" / "llm.md"


def test_every_column_of_the_llm_tables_is_documented(store):
    text = DOC.read_text()
    for table in ("llm_cache", "llm_calls"):
        section = re.search(rf"^## `{table}`$(.*?)(?=^## |\Z)", text, re.M | re.S)
        assert section, f"docs/store/llm.md has no section for {table}"
        columns = [r[0] for r in store.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table])]  # fmt: skip
        assert columns
        missing = [c for c in columns if f"`{c}`" not in section.group(1)]
        assert missing == [], f"{table} columns missing from docs/store/llm.md: {missing}"

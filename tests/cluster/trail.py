"""Fill `insights` / `insight_sources` straight from TRAIL's GAIA rows with SQL, as the importer will."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from failatlas.store import Store


def insight_id(phase: str, text: str) -> str:
    return hashlib.sha256(f"{phase}\x1f{text}".encode()).hexdigest()[:16]


def load_trail(store: Store, path: Path, *, limit: int | None = None, phase: str = "other") -> int:
    """Insert TRAIL errors as insights (text = description, label = category); returns the number of rows
    read."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("description")][:limit]
    sources = [
        (
            insight_id(phase, r["description"]),
            f"trail:{r['trace_id']}:{r['error_idx']}",
            "trail",
            path.name,
            i + 1,
            "description",
            r["category"],
            r["trace_id"],
            "GAIA",
        )
        for i, r in enumerate(rows)
    ]
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO insight_sources (insight_id, source_key, origin, source_file, source_line,"
            " source_field, label, task_id, benchmark) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            sources,
        )
        texts = {insight_id(phase, r["description"]): r["description"] for r in rows}
        conn.executemany(
            "INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, ?, ?, 1)"
            " ON CONFLICT DO NOTHING",
            [(k, phase, v) for k, v in texts.items()],
        )
        conn.execute(
            "UPDATE insights SET n_occurrences = s.n FROM (SELECT insight_id, count(*) AS n"
            " FROM insight_sources GROUP BY insight_id) s WHERE s.insight_id = insights.id"
        )
    return len(rows)

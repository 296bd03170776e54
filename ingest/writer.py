"""Writes insight occurrences in one transaction: identical insights stored once, each occurrence once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from failatlas import __version__
from failatlas.store import Store
from ingest.model import SOURCE_COLUMNS, IngestReport, RawInsight

_CHUNK = 500


def _values_sql(n_rows: int, n_cols: int) -> str:
    row = "(" + ", ".join("?" * n_cols) + ")"
    return ", ".join([row] * n_rows)


def _insert_chunked(conn: Any, sql_prefix: str, rows: Sequence[tuple[Any, ...]], n_cols: int) -> None:
    for start in range(0, len(rows), _CHUNK):
        chunk = rows[start : start + _CHUNK]
        conn.execute(sql_prefix + _values_sql(len(chunk), n_cols), [v for row in chunk for v in row])


def write_insights(
    store: Store,
    insights: Sequence[RawInsight],
    report: IngestReport,
    *,
    stage: str,
    params: dict[str, Any],
    summary: dict[str, Any] | None = None,
) -> list[RawInsight]:
    """Store the occurrences not stored yet, create missing insights, refresh their counts, log the stage run.

    Everything happens in one transaction: on any error the store is left as it was. Sets
    `report.new_occurrences`, `report.new_insights` and `report.stage_run_id`; returns the occurrences that
    were new. `summary` adds entries to the stage run's recorded summary.
    """
    unique: dict[str, RawInsight] = {}
    for insight in insights:
        unique.setdefault(insight.source_key, insight)
    started = datetime.now(UTC).replace(tzinfo=None)
    with store.write() as conn:
        existing: set[str] = set()
        keys = list(unique)
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            rows = conn.execute(
                f"SELECT source_key FROM insight_sources WHERE source_key IN ({', '.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            existing.update(r[0] for r in rows)
        new = [i for k, i in unique.items() if k not in existing]

        by_id: dict[str, RawInsight] = {}
        for insight in new:
            by_id.setdefault(insight.insight_id, insight)
        known: set[str] = set()
        ids = list(by_id)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            rows = conn.execute(f"SELECT id FROM insights WHERE id IN ({', '.join('?' * len(chunk))})", chunk)
            known.update(r[0] for r in rows.fetchall())
        fresh = [(i, v.phase, v.text, 0) for i, v in by_id.items() if i not in known]
        if fresh:
            _insert_chunked(conn, "INSERT INTO insights (id, phase, text, n_occurrences) VALUES ", fresh, 4)
        if new:
            _insert_chunked(
                conn,
                f"INSERT INTO insight_sources ({', '.join(SOURCE_COLUMNS)}) VALUES ",
                [i.row() for i in new],
                len(SOURCE_COLUMNS),
            )
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                conn.execute(
                    "UPDATE insights SET n_occurrences = counts.n FROM ("
                    " SELECT insight_id, count(*) AS n FROM insight_sources"
                    f" WHERE insight_id IN ({', '.join('?' * len(chunk))}) GROUP BY insight_id) AS counts"
                    " WHERE insights.id = counts.insight_id",
                    chunk,
                )
        report.new_occurrences = len(new)
        report.new_insights = len(fresh)
        report.stage_run_id = _record_stage_run(conn, stage, params, report, started, summary or {})
    return new


def _record_stage_run(
    conn: Any,
    stage: str,
    params: dict[str, Any],
    report: IngestReport,
    started: datetime,
    extra: dict[str, Any],
) -> str:
    params_json = json.dumps(params, sort_keys=True, default=str)
    run_id = hashlib.sha256(f"{stage}\n{params_json}\n{started.isoformat()}".encode()).hexdigest()[:16]
    summary = report.model_dump(include={"occurrences", "new_occurrences", "new_insights"})
    summary["warnings"] = len(report.warnings)
    summary["skipped"] = len(report.skipped)
    summary["failed"] = len(report.failed)
    summary.update(extra)
    conn.execute(
        "INSERT INTO stage_runs (id, stage, params, code_version, started_at, finished_at, status, summary)"
        " VALUES (?, ?, ?, ?, ?, ?, 'ok', ?)",
        [
            run_id,
            stage,
            params_json,
            __version__,
            started,
            datetime.now(UTC).replace(tzinfo=None),
            json.dumps(summary),
        ],
    )
    return run_id

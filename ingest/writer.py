"""Every write of ingest: insight occurrences and their stage run in one transaction, identical insights stored
once, each occurrence once. The only module of ingest that writes to the store."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from failatlas.core.stages import StageRun
from failatlas.core.store import Store
from failatlas.ingest.infer import infer_facets
from failatlas.ingest.kinds import KIND_IDS
from failatlas.ingest.model import SOURCE_COLUMNS, IngestResult, RawInsight

_BATCH_SCHEMA = {
    "source_key": "str",
    "insight_id": "str",
    "origin": "str",
    "extractor": "str",
    "source_file": "str",
    "source_line": "int",
    "source_field": "str",
    "label": "str",
    "run_id": "str",
    "task_id": "str",
    "agent": "str",
    "model": "str",
    "benchmark": "str",
    "paper_id": "str",
    "detail": "str",
    "kind": "str",
    "object": "str",
    "phase": "str",
    "text": "str",
}


def _batch_frame(insights: Sequence[RawInsight]) -> Any:
    import polars as pl

    columns = (
        list(zip(*[(*i.row(), i.phase, i.text) for i in insights], strict=True))
        if insights
        else [() for _ in _BATCH_SCHEMA]
    )
    schema = {name: pl.Int64 if kind == "int" else pl.Utf8 for name, kind in _BATCH_SCHEMA.items()}
    return pl.DataFrame(
        {name: list(values) for name, values in zip(schema, columns, strict=True)}, schema=schema
    )


def write_insights(
    store: Store,
    insights: Sequence[RawInsight],
    result: IngestResult,
    run: StageRun,
    *,
    replace: tuple[str, list[Any]] | None = None,
) -> list[RawInsight]:
    """Store the occurrences not stored yet, create missing insights, refresh their counts, record `run`.

    `replace` (a condition over `insight_sources` and its parameters) first deletes the occurrences it selects, and
    the insights left with none: re-mining replaces what an older extractor stored. Everything happens in one
    transaction, the `stage_runs` row included: on any error the store is left as it was. Sets the counts of
    `result` (and `run`) and `result.stage_run_id`; returns the occurrences that were new.
    """
    unique: dict[str, RawInsight] = {}
    for insight in insights:
        if insight.kind is None:  # free text (files, the LLM extractor): the kind its source or words give
            insight.kind, insight.object = given_facets(insight) or infer_facets(insight.phase, insight.text,
                                                                                 insight.object)
        unique.setdefault(insight.source_key, insight)
    result.occurrences = len(insights)
    # The batch travels to DuckDB as a Parquet file: binding tens of thousands of parameters is far slower.
    with tempfile.TemporaryDirectory(prefix="failatlas-ingest-") as tmp:
        batch_file = Path(tmp) / "batch.parquet"
        _batch_frame(list(unique.values())).write_parquet(batch_file)
        with store.write() as conn:
            if replace is not None:
                _delete_sources(conn, *replace, run)
            conn.execute(
                "CREATE OR REPLACE TEMP TABLE ingest_batch AS SELECT b.* FROM read_parquet(?) b"
                " ANTI JOIN insight_sources s ON s.source_key = b.source_key",
                [str(batch_file)],
            )
            new_keys = {r[0] for r in conn.execute("SELECT source_key FROM ingest_batch").fetchall()}
            n_fresh = conn.execute(
                "INSERT INTO insights (id, phase, text, n_occurrences)"
                " SELECT insight_id, any_value(phase), any_value(text), 0 FROM ingest_batch b"
                " WHERE NOT EXISTS (SELECT 1 FROM insights i WHERE i.id = b.insight_id) GROUP BY insight_id"
            ).fetchone()[0]
            columns = ", ".join(SOURCE_COLUMNS)
            conn.execute(f"INSERT INTO insight_sources ({columns}) SELECT {columns} FROM ingest_batch")
            conn.execute(
                "UPDATE insights SET n_occurrences = counts.n FROM ("
                " SELECT insight_id, count(*) AS n FROM insight_sources"
                " WHERE insight_id IN (SELECT insight_id FROM ingest_batch) GROUP BY insight_id) AS counts"
                " WHERE insights.id = counts.insight_id"
            )
            refresh_facets(conn, "SELECT insight_id FROM ingest_batch")
            conn.execute("DROP TABLE ingest_batch")
            result.new_occurrences = len(new_keys)
            result.new_insights = int(n_fresh)
            result.stage_run_id = run.id
            run.count("insights", result.new_insights)
            run.count("insight_sources", result.new_occurrences)
            run.note(occurrences=result.occurrences, warnings=len(result.warnings), skipped=len(result.skipped),
                     failed=len(result.failed))
            run.record(conn)
    return [insight for key, insight in unique.items() if key in new_keys]


def given_facets(insight: RawInsight) -> tuple[str, str | None] | None:
    """The kind (and object) an imported row states in its own `kind` (and `object`) field, when it is a known
    kind; None otherwise."""
    kind, obj = insight.detail.get("kind"), insight.detail.get("object")
    if not isinstance(kind, str) or kind not in KIND_IDS:
        return None
    return kind, insight.object or (obj.strip() if isinstance(obj, str) and 0 < len(obj.strip()) <= 200 else None)


def refresh_facets(conn: Any, ids_sql: str) -> None:
    """Set the kind and object of the insights `ids_sql` selects from their occurrences: the (kind, object) most of
    them give, a known kind before `unknown` (ties: the first by name). An insight's text is one statement, so its
    occurrences agree unless free text was imported with differing fields."""
    conn.execute(
        "UPDATE insights SET kind = f.kind, object = f.object FROM ("
        " SELECT insight_id, kind, object FROM ("
        "  SELECT insight_id, coalesce(kind, 'unknown') AS kind, object, count(*) AS n FROM insight_sources"
        "  WHERE insight_id IN (" + ids_sql + ") GROUP BY ALL)"
        " QUALIFY row_number() OVER (PARTITION BY insight_id"
        "  ORDER BY kind = 'unknown', n DESC, kind, object NULLS LAST) = 1"
        ") AS f WHERE insights.id = f.insight_id"
    )


def _delete_sources(conn: Any, where: str, params: list[Any], run: StageRun) -> None:
    """Delete the occurrences `where` selects, recount their insights and delete those left with none."""
    conn.execute(f"CREATE OR REPLACE TEMP TABLE ingest_dropped AS SELECT source_key, insight_id FROM insight_sources"
                 f" WHERE {where}", params)
    dropped = conn.execute("SELECT count(*), count(DISTINCT insight_id) FROM ingest_dropped").fetchone()
    conn.execute("DELETE FROM insight_sources WHERE source_key IN (SELECT source_key FROM ingest_dropped)")
    gone = conn.execute(
        "DELETE FROM insights WHERE id IN (SELECT insight_id FROM ingest_dropped)"
        " AND NOT EXISTS (SELECT 1 FROM insight_sources s WHERE s.insight_id = insights.id)"
    ).fetchone()[0]
    conn.execute(
        "UPDATE insights SET n_occurrences = counts.n FROM ("
        " SELECT insight_id, count(*) AS n FROM insight_sources"
        " WHERE insight_id IN (SELECT insight_id FROM ingest_dropped) GROUP BY insight_id) AS counts"
        " WHERE insights.id = counts.insight_id"
    )
    conn.execute("DROP TABLE ingest_dropped")
    run.note(replaced_occurrences=int(dropped[0]), removed_insights=int(gone))

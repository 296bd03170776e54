"""Every write of ingest: insight occurrences and their stage run in one transaction, identical insights stored
once, each occurrence once. The only module of ingest that writes to the store."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from failatlas.core.stages import StageRun
from failatlas.core.store import Store
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
    store: Store, insights: Sequence[RawInsight], result: IngestResult, run: StageRun
) -> list[RawInsight]:
    """Store the occurrences not stored yet, create missing insights, refresh their counts, record `run`.

    Everything happens in one transaction, the `stage_runs` row included: on any error the store is left as
    it was. Sets the counts of `result` (and `run`) and `result.stage_run_id`; returns the occurrences that
    were new.
    """
    unique: dict[str, RawInsight] = {}
    for insight in insights:
        unique.setdefault(insight.source_key, insight)
    result.occurrences = len(insights)
    # The batch travels to DuckDB as a Parquet file: binding tens of thousands of parameters is far slower.
    with tempfile.TemporaryDirectory(prefix="failatlas-ingest-") as tmp:
        batch_file = Path(tmp) / "batch.parquet"
        _batch_frame(list(unique.values())).write_parquet(batch_file)
        with store.write() as conn:
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

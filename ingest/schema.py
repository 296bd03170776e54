"""Tables owned by `ingest`: raw failure insights (documented in docs/STORE.md)."""

from failatlas.store import Migration

MIGRATIONS = [
    Migration(
        package="ingest",
        version=1,
        name="insights",
        sql="""
        CREATE TABLE insights (
            id VARCHAR PRIMARY KEY,            -- sha256 of (phase, text), first 16 hex digits
            phase VARCHAR NOT NULL,            -- design | implementation | execution | conclusion | monitor | other
            text VARCHAR NOT NULL,
            n_occurrences INTEGER NOT NULL,    -- how many sources stated exactly this insight
            first_seen TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE insight_sources (
            insight_id VARCHAR NOT NULL,       -- insights.id
            source_key VARCHAR NOT NULL,       -- unique per occurrence: re-importing the same file adds nothing
            origin VARCHAR NOT NULL,           -- run | trail | jsonl | csv | expbench_judge | inspect
            source_file VARCHAR,
            source_line INTEGER,
            source_field VARCHAR,              -- e.g. design_error_analysis, description
            label VARCHAR,                     -- human label where the source has one
            run_id VARCHAR,
            task_id VARCHAR,
            agent VARCHAR,
            model VARCHAR,
            benchmark VARCHAR,
            paper_id VARCHAR,
            detail JSON,                       -- extractor-specific extras (e.g. the missing module's name)
            imported_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (source_key)
        );
        """,
    ),
]

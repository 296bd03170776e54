"""Tables owned by `ingest`: raw failure insights and every place each was stated (docs/store/ingest.md)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="ingest",
        version=1,
        name="insights",
        sql="""
        CREATE TABLE insights (
            id VARCHAR PRIMARY KEY,            -- sha256 of phase and normalised text, 16 hex digits
            phase VARCHAR NOT NULL,            -- design|implementation|execution|conclusion|monitor|other
            text VARCHAR NOT NULL,             -- whitespace-normalised
            n_occurrences INTEGER NOT NULL,    -- number of insight_sources rows with this insight_id
            first_seen TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE insight_sources (
            source_key VARCHAR PRIMARY KEY,    -- one per occurrence: re-importing adds nothing
            insight_id VARCHAR NOT NULL,       -- insights.id
            origin VARCHAR NOT NULL,           -- run | trail | jsonl | csv | expbench | inspect
            extractor VARCHAR NOT NULL DEFAULT 'import',  -- deterministic | llm | import
            source_file VARCHAR,               -- absolute path of the imported file; NULL for runs
            source_line INTEGER,               -- 1-based line in source_file where the row starts, if known
            source_field VARCHAR,              -- e.g. judgements.design.error_analysis, description
            label VARCHAR,                     -- human label where the source has one (TRAIL category)
            run_id VARCHAR,
            task_id VARCHAR,
            agent VARCHAR,
            model VARCHAR,
            benchmark VARCHAR,
            paper_id VARCHAR,
            detail JSON,                       -- source-specific extras (missing module, TRAIL impact, score)
            imported_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    Migration(
        package="ingest",
        version=2,
        name="insight_facets",
        sql="""
        -- the facets of a statement (ingest/kinds.py): what failed and on what; the phase is insights.phase
        ALTER TABLE insights ADD COLUMN kind VARCHAR DEFAULT 'unknown';   -- one of ingest.kinds.KIND_IDS
        ALTER TABLE insights ADD COLUMN object VARCHAR;                   -- function, module, package, metric, ...
        -- per occurrence: NULL for occurrences mined before facets existed (`ingest runs` replaces those)
        ALTER TABLE insight_sources ADD COLUMN kind VARCHAR;
        ALTER TABLE insight_sources ADD COLUMN object VARCHAR;
        """,
    ),
]

"""Tables owned by the core: a record of every stage run (parameters, seed, code version, seconds, row counts;
failatlas.core.stages)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="failatlas",
        version=1,
        name="stage_runs",
        sql="""
        CREATE TABLE stage_runs (
            id VARCHAR PRIMARY KEY,
            stage VARCHAR NOT NULL,
            params JSON NOT NULL,
            code_version VARCHAR NOT NULL,
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP,
            status VARCHAR NOT NULL,
            summary JSON
        );
        """,
    ),
    Migration(
        package="failatlas",
        version=2,
        name="stage_runs_contract",
        sql="""
        ALTER TABLE stage_runs ADD COLUMN seed BIGINT;
        ALTER TABLE stage_runs ADD COLUMN seconds DOUBLE;
        ALTER TABLE stage_runs ADD COLUMN rows JSON;
        UPDATE stage_runs SET status = 'ok' WHERE status = 'completed';
        """,
    ),
]

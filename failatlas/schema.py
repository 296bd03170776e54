"""Tables owned by the core: a record of every stage run (parameters, seed, code version)."""

from failatlas.store import Migration

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
]

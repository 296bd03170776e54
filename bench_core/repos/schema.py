"""Tables owned by `bench_core.repos`: the repository cache (documented in docs/store/repos.md)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="bench_core.repos",
        version=1,
        name="repositories",
        sql="""
        CREATE TABLE repositories (
            id VARCHAR PRIMARY KEY,
            url VARCHAR,
            commit VARCHAR NOT NULL,
            commit_from VARCHAR NOT NULL,
            path VARCHAR NOT NULL,
            source VARCHAR NOT NULL,
            source_kind VARCHAR NOT NULL,
            task_ids VARCHAR[] NOT NULL DEFAULT [],
            added_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            stage_run_id VARCHAR
        );
        """,
    ),
]

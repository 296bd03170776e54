"""Tables owned by `bench_core.tasks`: the task catalog (documented in docs/store/tasks.md)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="bench_core.tasks",
        version=1,
        name="tasks",
        sql="""
        CREATE TABLE tasks (
            id VARCHAR PRIMARY KEY,
            benchmark VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            paper_id VARCHAR,
            title VARCHAR,
            question VARCHAR NOT NULL,
            gpus INTEGER NOT NULL DEFAULT 0,
            n_warnings INTEGER NOT NULL DEFAULT 0,
            spec JSON NOT NULL,
            source VARCHAR,
            spec_hash VARCHAR NOT NULL,
            imported_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            updated_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE INDEX tasks_benchmark_kind ON tasks (benchmark, kind);
        """,
    ),
]

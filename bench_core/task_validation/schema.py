"""Tables owned by `bench_core.task_validation`: one verdict per task on whether the task itself is sound."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="bench_core.task_validation",
        version=1,
        name="task_validations",
        sql="""
        CREATE TABLE task_validations (
            task_id VARCHAR PRIMARY KEY,
            benchmark VARCHAR NOT NULL,
            status VARCHAR NOT NULL,       -- valid | needs-gpu | repo-unavailable | prepare-fails | data-unavailable
                                           -- | env-failed | gold-fails | null-passes | not-checkable | infra-error
            reason VARCHAR NOT NULL,       -- one line: why this status (the failing phase, the error's last line)
            gold_run_id VARCHAR,           -- the runs it was decided on (NULL when no run was needed)
            null_run_id VARCHAR,
            setting VARCHAR,               -- the task setting validated (NULL: the task's default)
            sandbox VARCHAR NOT NULL,
            stage_run_id VARCHAR NOT NULL, -- the `tasks.validate` stage run that wrote it
            validated_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
]

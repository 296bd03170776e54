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
    Migration(
        package="bench_core.task_validation",
        version=2,
        name="task_validations_mutation",
        sql="""
        -- the mutation score of a valid task (task_validation/mutation.py); NULL where none was measured
        ALTER TABLE task_validations ADD COLUMN mutants INTEGER;            -- mutants tried
        ALTER TABLE task_validations ADD COLUMN mutants_killed INTEGER;     -- rejected by a check that runs code
        ALTER TABLE task_validations ADD COLUMN mutation_score DOUBLE;      -- killed / (killed + survived)
        ALTER TABLE task_validations ADD COLUMN mutation JSON;              -- MutationScore: counts, seed, survivors
        """,
    ),
    Migration(
        package="bench_core.task_validation",
        version=3,
        name="task_validations_next_step",
        sql="""
        -- issue 52: what to run next (empty for valid), gold's and null's phases, the seconds of their runs and
        -- re-runs, the task's paper
        ALTER TABLE task_validations ADD COLUMN next_step VARCHAR;
        ALTER TABLE task_validations ADD COLUMN phases JSON;
        ALTER TABLE task_validations ADD COLUMN seconds DOUBLE;
        ALTER TABLE task_validations ADD COLUMN paper_id VARCHAR;
        """,
    ),
    Migration(
        package="bench_core.task_validation",
        version=4,
        name="task_validations_method_mutation",
        sql="""
        -- issue 50: the method mutation score of a valid task (task_validation/method_mutation.py), beside the
        -- syntax mutation score above; NULL where none was measured
        ALTER TABLE task_validations ADD COLUMN method_mutants INTEGER;         -- method mutants tried
        ALTER TABLE task_validations ADD COLUMN method_mutants_killed INTEGER;  -- rejected by I or E
        ALTER TABLE task_validations ADD COLUMN method_mutation_score DOUBLE;   -- killed / (killed + survived)
        ALTER TABLE task_validations ADD COLUMN method_mutation JSON;           -- MethodMutationScore: each mutant's
                                                                                -- I, E, gaps; tolerance warnings
        """,
    ),
]

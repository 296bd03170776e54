"""Tables owned by `bench_core.runs`: runs, agent steps, sandbox commands (documented in docs/STORE.md)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="bench_core.runs",
        version=1,
        name="runs",
        sql="""
        CREATE TABLE runs (
            id VARCHAR PRIMARY KEY,            -- stable key: hash of (task_id, agent, model, attempt, agent params)
            task_id VARCHAR NOT NULL,
            agent VARCHAR NOT NULL,
            agent_params JSON NOT NULL,
            model VARCHAR NOT NULL,            -- '' when the agent uses no model
            attempt INTEGER NOT NULL,
            benchmark VARCHAR NOT NULL,
            status VARCHAR NOT NULL,           -- completed | agent_error | infra_error
            infra_error VARCHAR,               -- what failed outside the agent (image, daemon, endpoint)
            fault_injected VARCHAR,            -- fault-injecting agents record which fault
            sandbox VARCHAR NOT NULL,          -- docker | local
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP NOT NULL,
            duration_s DOUBLE NOT NULL,
            outputs JSON NOT NULL,             -- design, conclusion, diff, run_script, logs, artifacts
            cost_usd DOUBLE NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE run_steps (
            run_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,
            kind VARCHAR NOT NULL,             -- message | tool_call | tool_result | note
            role VARCHAR,
            content VARCHAR,
            tool VARCHAR,
            arguments JSON,
            ts TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, seq)
        );
        CREATE TABLE sandbox_commands (
            run_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,
            purpose VARCHAR NOT NULL,          -- agent | harness | validator
            command VARCHAR NOT NULL,
            started_at TIMESTAMP NOT NULL,
            duration_s DOUBLE NOT NULL,
            exit_code INTEGER,
            timed_out BOOLEAN NOT NULL,
            killed_reason VARCHAR,             -- timeout | oom | pids | NULL
            output_truncated BOOLEAN NOT NULL,
            stdout_tail VARCHAR,
            stderr_tail VARCHAR,
            PRIMARY KEY (run_id, purpose, seq)
        );
        """,
    ),
    Migration(
        package="bench_core.runs",
        version=2,
        name="run_inputs",
        sql="""
        -- the setting the agent was given the task in (AutoExperiment's Partial Code, ...); NULL: the task has none
        ALTER TABLE runs ADD COLUMN setting VARCHAR;
        -- the repository the run was prepared from (NULL for runs stored before this column, or when unknown)
        ALTER TABLE runs ADD COLUMN repo_url VARCHAR;
        ALTER TABLE runs ADD COLUMN repo_commit VARCHAR;
        -- repository, image, sandbox kind, resources after overrides, budget; and its hash, which decides whether
        -- a stored infra_error run is redone (NULL: stored before fingerprints, so redone)
        ALTER TABLE runs ADD COLUMN inputs JSON;
        ALTER TABLE runs ADD COLUMN inputs_hash VARCHAR;
        """,
    ),
    Migration(
        package="bench_core.runs",
        version=3,
        name="command_provenance",
        sql="""
        -- an agent command's process and file events (bench_core/sandbox/provenance.py): which processes ran, which
        -- files each read as code, which process wrote which file; {"unavailable": why} where it could not be
        -- recorded; NULL for other commands and runs stored before
        ALTER TABLE sandbox_commands ADD COLUMN provenance JSON;
        """,
    ),
]

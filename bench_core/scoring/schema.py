"""Tables owned by `bench_core.scoring`: validator outcomes, monitor findings, judge verdicts, per-run scores."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="bench_core.scoring",
        version=1,
        name="scores",
        sql="""
        CREATE TABLE validations (
            run_id VARCHAR PRIMARY KEY,
            outcome VARCHAR NOT NULL,          -- passed | wrong_value | runtime_error | timeout | oom | env_setup
                                               -- | patch_failed | not_run | fabricated_result
            command VARCHAR,
            exit_code INTEGER,
            duration_s DOUBLE,
            stdout_tail VARCHAR,
            stderr_tail VARCHAR,
            metrics JSON,                      -- metric -> {observed, expected, rtol, atol, ok}
            detail VARCHAR,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE monitor_findings (
            run_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,
            rule VARCHAR NOT NULL,             -- ground_truth_access | git_history | network | fabricated_results | llm
            severity VARCHAR NOT NULL,         -- fail | warn
            evidence VARCHAR NOT NULL,
            source VARCHAR NOT NULL,           -- rule | llm
            PRIMARY KEY (run_id, seq)
        );
        CREATE TABLE judgements (
            run_id VARCHAR NOT NULL,
            phase VARCHAR NOT NULL,            -- design | implementation | conclusion | monitor
            judge VARCHAR NOT NULL,            -- e.g. design-llm, implementation-hidden-tests
            status VARCHAR NOT NULL,           -- ok | judge_failed | not_run
            score DOUBLE,                      -- 0..1, NULL unless status = ok
            passed BOOLEAN,
            verdict JSON,
            error_analysis VARCHAR,            -- what ingest mines
            reason VARCHAR,                    -- why not run / why it failed
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (run_id, phase, judge)
        );
        """,
    ),
    Migration(
        package="bench_core.scoring",
        version=2,
        name="judgement_kind",
        sql="""
        -- the kind the judge declares (bench_core.scoring.judges): offline | llm; the metrics rank verdicts by it
        ALTER TABLE judgements ADD COLUMN kind VARCHAR NOT NULL DEFAULT 'offline';
        -- rows stored before kinds were declared: their judges were recognised by name
        UPDATE judgements SET kind = 'llm' WHERE judge LIKE '%llm%';
        """,
    ),
    Migration(
        package="bench_core.scoring",
        version=3,
        name="validation_evidence",
        sql="""
        -- what the re-run was decided on: {"tree": constructed | diff | script, "carried": [...], "notes": [...]}
        -- (bench_core/scoring/constructed.py); NULL for rows scored before
        ALTER TABLE validations ADD COLUMN evidence JSON;
        """,
    ),
    Migration(
        package="bench_core.scoring",
        version=4,
        name="evidence",
        sql="""
        -- what the harness built about a run before judging it (bench_core/scoring/evidence/): one row per record
        CREATE TABLE evidence (
            run_id VARCHAR NOT NULL,
            id VARCHAR NOT NULL,               -- unique in the run: trace, constructed, rerun, hidden-tests, ...
            kind VARCHAR NOT NULL,             -- the builder's kind (evidence.BUILDERS)
            status VARCHAR NOT NULL,           -- ok | failed | not_applicable | agent_fault | crashed
            agent_code_ran BOOLEAN NOT NULL,   -- the agent's code ran where this was made
            tree VARCHAR,                      -- content digest of the tree it was built on
            blame VARCHAR,                     -- agent | harness: whose failure a failed build is
            observed JSON,                     -- what it showed, summarised
            notes JSON,
            PRIMARY KEY (run_id, id)
        );
        -- the evidence ids each verdict, execution verdict and finding was decided on
        ALTER TABLE judgements ADD COLUMN evidence_ids JSON;
        ALTER TABLE validations ADD COLUMN evidence_ids JSON;
        ALTER TABLE monitor_findings ADD COLUMN evidence_ids JSON;
        """,
    ),
]

"""The writes of `bench_core.task_validation`: one row per task, replaced when the task is validated again."""

from __future__ import annotations

import json
from collections.abc import Iterable

import duckdb

from failatlas.bench_core.task_validation.model import TaskVerdict


def write_verdicts(conn: duckdb.DuckDBPyConnection, verdicts: Iterable[TaskVerdict], *, sandbox: str,
                   stage_run_id: str) -> int:
    """Replace the stored verdict of each task (inside the caller's transaction); returns the rows written."""
    n = 0
    for v in verdicts:
        conn.execute("DELETE FROM task_validations WHERE task_id = ?", [v.task_id])
        m, mm = v.mutation, v.method_mutation
        conn.execute(
            "INSERT INTO task_validations (task_id, benchmark, status, reason, gold_run_id, null_run_id, setting,"
            " sandbox, stage_run_id, mutants, mutants_killed, mutation_score, mutation, next_step, phases, seconds,"
            " paper_id, method_mutants, method_mutants_killed, method_mutation_score, method_mutation)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [v.task_id, v.benchmark, v.status, v.reason, v.gold_run_id, v.null_run_id, v.setting, sandbox,
             stage_run_id, m.mutants if m else None, m.killed if m else None, m.score if m else None,
             m.model_dump_json() if m else None, v.next_step, json.dumps(v.phases), v.seconds, v.paper_id,
             mm.mutants if mm else None, mm.killed if mm else None, mm.score if mm else None,
             mm.model_dump_json() if mm else None])
        n += 1
    return n

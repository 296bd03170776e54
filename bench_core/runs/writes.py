"""Every SQL write of `bench_core.runs`, beside its `schema.py`: one run stored in one transaction."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from failatlas.bench_core.runs.model import CommandRow, RunRecord
from failatlas.core.store import Store

if TYPE_CHECKING:
    import pyarrow as pa

_COMMAND_COLUMNS = ("seq", "purpose", "command", "started_at", "duration_s", "exit_code", "timed_out",
                    "killed_reason", "output_truncated", "stdout_tail", "stderr_tail", "provenance")


def write_run(store: Store, record: RunRecord) -> dict[str, int]:
    """Store one run (replacing any earlier record of the same id) in a single transaction; returns the rows
    written per table."""
    r = record.request
    with store.write() as conn:
        for table, column in (("runs", "id"), ("run_steps", "run_id"), ("sandbox_commands", "run_id")):
            conn.execute(f"DELETE FROM {table} WHERE {column} = ?", [r.run_id])
        duration = (record.finished_at - record.started_at).total_seconds()
        outputs = record.outputs.model_dump(mode="json")
        if record.agent_error:
            outputs["agent_error"] = record.agent_error
        inputs = record.inputs
        conn.execute(
            "INSERT INTO runs (id, task_id, agent, agent_params, model, attempt, benchmark, status, infra_error,"
            " fault_injected, sandbox, started_at, finished_at, duration_s, outputs, cost_usd, tokens, setting,"
            " repo_url, repo_commit, inputs, inputs_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [r.run_id, r.task_id, r.agent, json.dumps(r.agent_params, sort_keys=True), r.model, r.attempt,
             record.benchmark, record.status, record.infra_error, record.fault_injected, record.sandbox,
             record.started_at, record.finished_at, duration, json.dumps(outputs), record.cost_usd, record.tokens,
             record.setting, inputs.repo_url if inputs else None, inputs.repo_commit if inputs else None,
             inputs.model_dump_json() if inputs else None, inputs.fingerprint if inputs else None],
        )
        if record.steps:
            conn.executemany(
                "INSERT INTO run_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [[r.run_id, s.seq, s.kind, s.role, s.content, s.tool,
                  json.dumps(s.arguments) if s.arguments is not None else None, s.ts] for s in record.steps],
            )
        if record.commands:
            # one Arrow table, not executemany: DuckDB binds executemany row by row (under 1,000 rows/s)
            commands = _commands_table(r.run_id, record.commands)  # noqa: F841 - read by the INSERT below
            conn.execute("INSERT INTO sandbox_commands SELECT * FROM commands")
    return {"runs": 1, "run_steps": len(record.steps), "sandbox_commands": len(record.commands)}


def _commands_table(run_id: str, commands: list[CommandRow]) -> pa.Table:
    """The `sandbox_commands` rows of one run, columns in table order."""
    import pyarrow as pa

    columns = {"run_id": pa.array([run_id] * len(commands), pa.string())}
    for name in _COMMAND_COLUMNS:
        columns[name] = pa.array([getattr(c, name) for c in commands])
    columns["seq"] = columns["seq"].cast(pa.int32())
    columns["exit_code"] = pa.array([c.exit_code for c in commands], pa.int32())
    return pa.table(columns)

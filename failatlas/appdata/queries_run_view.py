"""Read-only queries behind one run's view of the Drill-down (`pages/run_view.py`): everything stored about the run, and
another run of its task by agent (the gold run its diff is set against). Conventions as in `queries_store`."""

from __future__ import annotations

from typing import Any

import polars as pl

from failatlas.appdata.queries_store import json_value
from failatlas.core.store import Store


def run_detail(store: Store, run_id: str) -> dict[str, Any] | None:
    """Everything about one run: the run, its task (question, method, ground truth), the agent's steps and
    sandbox commands, the judges' verdicts, the validator's result, the monitor's findings, the diff, and the
    evidence records scoring built (None for a store scored before they were recorded), each verdict with the
    ids of the evidence it read.
    None when no such run is stored."""
    with store.read() as conn:
        cur = conn.execute("SELECT * FROM runs WHERE id = ?", [run_id])
        found = cur.fetchall()
        if not found:
            return None
        row = found[0]
        run = dict(zip([d[0] for d in cur.description], row, strict=True))
        spec_rows = conn.execute("SELECT spec FROM tasks WHERE id = ?", [run["task_id"]]).fetchall()

        def frame(sql: str) -> pl.DataFrame:
            return pl.from_arrow(conn.sql(sql, params=[run_id]).to_arrow_table())  # type: ignore[return-value]

        steps = frame("SELECT seq, kind, role, tool, arguments, content, ts FROM run_steps WHERE run_id = ?"
                      " ORDER BY seq")
        commands = frame("SELECT purpose, seq, command, exit_code, duration_s, timed_out, killed_reason,"
                         " output_truncated, stdout_tail, stderr_tail FROM sandbox_commands WHERE run_id = ?"
                         " ORDER BY purpose, seq")
        # a store scored before evidence was recorded has no `evidence` table nor `evidence_ids` columns
        recorded = bool(conn.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'evidence'")
                        .fetchall())
        ids = ", evidence_ids" if recorded else ", NULL AS evidence_ids"
        judgements = frame(f"SELECT phase, judge, status, score, passed, error_analysis, reason, verdict{ids}"
                           " FROM judgements WHERE run_id = ? ORDER BY phase, judge")
        findings = frame(f"SELECT seq, rule, severity, source, evidence{ids} FROM monitor_findings"
                         " WHERE run_id = ? ORDER BY seq")
        evidence = frame("SELECT id, kind, status, agent_code_ran, blame, tree, observed, notes FROM evidence"
                         " WHERE run_id = ? ORDER BY rowid") if recorded else None
        vcur = conn.execute("SELECT outcome, command, exit_code, duration_s, stdout_tail, stderr_tail, metrics,"
                            f" detail{ids} FROM validations WHERE run_id = ?", [run_id])
        vnames = [d[0] for d in vcur.description]
        vrows = vcur.fetchall()
    validation = dict(zip(vnames, vrows[0], strict=True)) if vrows else None
    if validation is not None:
        validation["metrics"] = json_value(validation["metrics"])
    outputs = json_value(run.pop("outputs")) or {}
    run["agent_params"] = json_value(run.get("agent_params"))
    spec = json_value(spec_rows[0][0]) if spec_rows else None
    task = None
    if isinstance(spec, dict):
        task = {
            "id": spec.get("id"), "benchmark": spec.get("benchmark"), "kind": spec.get("kind"),
            "title": spec.get("title"), "paper": spec.get("paper"), "question": spec.get("question"),
            "method": spec.get("method"), "instructions": spec.get("instructions"),
            "ground_truth": {k: spec.get(k) for k in ("design", "expected_conclusion", "implementation",
                                                       "expected_results", "success", "run")},
        }
    return {"run": run, "task": task, "outputs": outputs, "diff": outputs.get("diff") or "",
            "steps": steps, "commands": commands, "judgements": judgements, "validation": validation,
            "findings": findings, "evidence": evidence}


def agent_run_of_task(store: Store, task_id: str, agent: str, run_id: str) -> str | None:
    """The newest run of `agent` on this task other than `run_id` (with the reference agent: the left side of the
    run's diff against gold); None when there is none."""
    rows = store.query("SELECT id FROM runs WHERE task_id = ? AND agent = ? AND id <> ?"
                       " ORDER BY finished_at DESC NULLS LAST, id LIMIT 1", [task_id, agent, run_id])
    return rows[0][0] if rows else None

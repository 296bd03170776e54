"""Every SQL write of `bench_core.scoring`, beside its `schema.py`: a run's evidence, monitor findings, validation
and verdicts replaced together in one transaction."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from failatlas.core.store import Store

if TYPE_CHECKING:
    from failatlas.bench_core.scoring.evidence.model import Evidence
    from failatlas.bench_core.scoring.records import Finding, Validation, Verdict


def _write_findings(conn: Any, run_id: str, findings: list[Finding]) -> None:
    conn.execute("DELETE FROM monitor_findings WHERE run_id = ?", [run_id])
    for seq, f in enumerate(findings):
        conn.execute("INSERT INTO monitor_findings (run_id, seq, rule, severity, evidence, source, evidence_ids)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)",
                     [run_id, seq, f.rule, f.severity, f.evidence, f.source,
                      json.dumps(getattr(f, "evidence_ids", None) or [])])


def write_findings(store: Store, run_id: str, findings: list[Finding]) -> None:
    """Replace the monitor's findings of one run."""
    with store.write() as conn:
        _write_findings(conn, run_id, findings)


def write_scores(store: Store, run_id: str, findings: list[Finding], validation: Validation | None,
                 verdicts: list[Verdict], evidence: list[Evidence] | None = None) -> dict[str, int]:
    """Replace everything scoring stores about one run, in one transaction; returns the rows written per table."""
    evidence = evidence or []
    with store.write() as conn:
        _write_findings(conn, run_id, findings)
        conn.execute("DELETE FROM validations WHERE run_id = ?", [run_id])
        conn.execute("DELETE FROM judgements WHERE run_id = ?", [run_id])
        conn.execute("DELETE FROM evidence WHERE run_id = ?", [run_id])
        for e in evidence:
            row = e.row()
            conn.execute(
                "INSERT INTO evidence (run_id, id, kind, status, agent_code_ran, tree, blame, observed, notes)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, row["id"], row["kind"], row["status"], row["agent_code_ran"], row["tree"], row["blame"],
                 row["observed"], row["notes"]])
        if validation is not None:
            conn.execute(
                "INSERT INTO validations (run_id, outcome, command, exit_code, duration_s, stdout_tail, stderr_tail,"
                " metrics, detail, evidence, evidence_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, validation.outcome, validation.command, validation.exit_code, validation.duration_s,
                 validation.stdout_tail, validation.stderr_tail, json.dumps(validation.metrics), validation.detail,
                 json.dumps(validation.evidence) if validation.evidence else None,
                 json.dumps(getattr(validation, "evidence_ids", None) or [])],
            )
        for v in verdicts:
            conn.execute(
                "INSERT INTO judgements (run_id, phase, judge, status, score, passed, verdict, error_analysis,"
                " reason, kind, evidence_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, v.phase, v.judge, v.status, v.score, v.passed, json.dumps(v.verdict),
                 v.error_analysis or None, v.reason or None, v.kind,
                 json.dumps(getattr(v, "evidence_ids", None) or [])],
            )
    return {"monitor_findings": len(findings), "validations": int(validation is not None),
            "judgements": len(verdicts), "evidence": len(evidence)}

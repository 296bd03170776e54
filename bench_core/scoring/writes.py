"""Every SQL write of `bench_core.scoring`, beside its `schema.py`: a run's monitor findings, validation and
verdicts replaced together in one transaction."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from failatlas.core.store import Store

if TYPE_CHECKING:
    from failatlas.bench_core.scoring.judges import Verdict
    from failatlas.bench_core.scoring.monitor import Finding
    from failatlas.bench_core.scoring.validator import Validation


def _write_findings(conn: Any, run_id: str, findings: list[Finding]) -> None:
    conn.execute("DELETE FROM monitor_findings WHERE run_id = ?", [run_id])
    for seq, f in enumerate(findings):
        conn.execute("INSERT INTO monitor_findings VALUES (?, ?, ?, ?, ?, ?)",
                     [run_id, seq, f.rule, f.severity, f.evidence, f.source])


def write_findings(store: Store, run_id: str, findings: list[Finding]) -> None:
    """Replace the monitor's findings of one run."""
    with store.write() as conn:
        _write_findings(conn, run_id, findings)


def write_scores(store: Store, run_id: str, findings: list[Finding], validation: Validation | None,
                 verdicts: list[Verdict]) -> dict[str, int]:
    """Replace everything scoring stores about one run, in one transaction; returns the rows written per table."""
    with store.write() as conn:
        _write_findings(conn, run_id, findings)
        conn.execute("DELETE FROM validations WHERE run_id = ?", [run_id])
        conn.execute("DELETE FROM judgements WHERE run_id = ?", [run_id])
        if validation is not None:
            conn.execute(
                "INSERT INTO validations (run_id, outcome, command, exit_code, duration_s, stdout_tail, stderr_tail,"
                " metrics, detail, evidence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, validation.outcome, validation.command, validation.exit_code, validation.duration_s,
                 validation.stdout_tail, validation.stderr_tail, json.dumps(validation.metrics), validation.detail,
                 json.dumps(validation.evidence) if validation.evidence else None],
            )
        for v in verdicts:
            conn.execute(
                "INSERT INTO judgements (run_id, phase, judge, status, score, passed, verdict, error_analysis,"
                " reason, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, v.phase, v.judge, v.status, v.score, v.passed, json.dumps(v.verdict),
                 v.error_analysis or None, v.reason or None, v.kind],
            )
    return {"monitor_findings": len(findings), "validations": int(validation is not None),
            "judgements": len(verdicts)}

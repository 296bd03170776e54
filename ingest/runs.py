"""Insights from our own runs: judges' error analyses, monitor findings and validator outcomes.

Reads the tables declared by `bench_core.runs` and `bench_core.scoring` and writes `insights` and
`insight_sources` with the run's provenance. Runs that ended in an infrastructure error are skipped: their
failure is not the agent's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from failatlas.bench_core.scoring.validator import UNSCORED_OUTCOMES
from failatlas.core.errors import NotFoundError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store
from failatlas.ingest.importers.base import MAX_INSIGHT_CHARS
from failatlas.ingest.llm_extractor import LLMExtractor, default_extractor_llm
from failatlas.ingest.model import PHASES, IngestResult, RawInsight, RunRecord, RunsIngestParams
from failatlas.ingest.sentences import error_sentences
from failatlas.ingest.signatures import error_signatures
from failatlas.ingest.writer import write_insights

# One readable insight per validator outcome other than `passed` and `not_scored`.
OUTCOME_TEXTS: dict[str, str] = {
    "wrong_value": "Execution finished but its results do not match the expected values",
    "runtime_error": "Execution failed with a runtime error",
    "timeout": "Execution did not finish within the time limit",
    "oom": "Execution ran out of memory",
    "env_setup": "The execution environment could not be set up",
    "patch_failed": "The agent's code changes could not be applied to the repository",
    "not_run": "The experiment could not be run by the validator",
    "fabricated_result": "Reported results were not produced by re-running the experiment",
}
# Monitor rules whose finding is one fixed insight (the evidence is kept as detail); other rules (e.g. `llm`)
# have their evidence split into sentences.
MONITOR_RULE_TEXTS: dict[str, str] = {
    "ground_truth_access": "The agent accessed ground-truth files it must not read",
    "git_history": "The agent read the repository's git history, where answers may be found",
    "network": "The agent used the network where it was not allowed",
    "fabricated_results": "The agent reported results it did not produce",
}
_EVIDENCE_LIMIT = 500


def _dicts(conn: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    cur = conn.execute(sql, list(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def load_runs(store: Store, run_ids: Sequence[str] | None = None) -> list[RunRecord]:
    """The runs (all, or those named) with their judgements, monitor findings and validation."""
    where, sub, params = "", "", []
    if run_ids is not None:
        if not run_ids:
            return []
        placeholders = ", ".join("?" * len(run_ids))
        where, sub = f" WHERE r.id IN ({placeholders})", f" WHERE run_id IN ({placeholders})"
        params = list(run_ids)
    with store.read() as conn:
        runs = _dicts(
            conn,
            "SELECT r.id, r.task_id, r.agent, r.model, r.benchmark, r.status, r.infra_error,"
            " t.paper_id FROM runs r LEFT JOIN tasks t ON t.id = r.task_id" + where + " ORDER BY r.id",
            params,
        )
        if run_ids is not None:
            missing = sorted(set(run_ids) - {r["id"] for r in runs})
            if missing:
                raise NotFoundError(
                    f"no run(s) with id {', '.join(missing[:5])}",
                    hint="run ids are the `id` column of the runs table",
                )
        records = {r["id"]: RunRecord(run=r) for r in runs}
        for row in _dicts(conn, f"SELECT * FROM judgements{sub} ORDER BY run_id, phase, judge", params):
            if row["run_id"] in records:
                records[row["run_id"]].judgements.append(row)
        for row in _dicts(conn, f"SELECT * FROM monitor_findings{sub} ORDER BY run_id, seq", params):
            if row["run_id"] in records:
                records[row["run_id"]].findings.append(row)
        for row in _dicts(conn, f"SELECT * FROM validations{sub} ORDER BY run_id", params):
            if row["run_id"] in records:
                records[row["run_id"]].validation = row
    return list(records.values())


def _insight(
    record: RunRecord,
    *,
    phase: str,
    text: str,
    key: str,
    source_field: str,
    extractor: str,
    detail: dict[str, Any],
) -> RawInsight:
    if len(text) > MAX_INSIGHT_CHARS:  # texts from a run can quote what an agent wrote: cut, never refused
        text = text[: MAX_INSIGHT_CHARS - 40].rstrip() + f" [{len(text) - MAX_INSIGHT_CHARS + 40:,} characters cut]"
    return RawInsight(
        phase=phase,
        text=text,
        origin="run",
        key=f"{record.run_id}:{key}",
        extractor=extractor,
        source_field=source_field,
        run_id=record.run_id,
        detail={k: v for k, v in detail.items() if v is not None},
        **record.provenance(),
    )


def judgement_insights(record: RunRecord) -> list[RawInsight]:
    """Each error sentence of each judge's error analysis, in the judge's phase."""
    found: list[RawInsight] = []
    for judgement in record.judgements:
        if judgement["status"] != "ok" or not judgement.get("error_analysis"):
            continue
        phase = judgement["phase"] if judgement["phase"] in PHASES else "other"
        source_field = f"judgements.{judgement['phase']}.error_analysis"
        for index, sentence in enumerate(error_sentences(judgement["error_analysis"])):
            found.append(
                _insight(
                    record,
                    phase=phase,
                    text=sentence,
                    key=f"{source_field}.{judgement['judge']}:{index}",
                    source_field=source_field,
                    extractor="deterministic",
                    detail={
                        "judge": judgement["judge"],
                        "score": judgement.get("score"),
                        "passed": judgement.get("passed"),
                    },
                )
            )
    return found


def monitor_insights(record: RunRecord) -> list[RawInsight]:
    """Monitor findings: a fixed insight per known rule, the evidence's sentences for LLM findings."""
    found: list[RawInsight] = []
    for finding in record.findings:
        detail = {"rule": finding["rule"], "severity": finding["severity"], "source": finding["source"]}
        fixed = MONITOR_RULE_TEXTS.get(finding["rule"])
        if fixed:
            found.append(
                _insight(
                    record,
                    phase="monitor",
                    text=fixed,
                    key=f"monitor_findings.{finding['seq']}:0",
                    source_field="monitor_findings.rule",
                    extractor="deterministic",
                    detail={**detail, "evidence": (finding["evidence"] or "")[:_EVIDENCE_LIMIT]},
                )
            )
            continue
        for index, sentence in enumerate(error_sentences(finding["evidence"])):
            found.append(
                _insight(
                    record,
                    phase="monitor",
                    text=sentence,
                    key=f"monitor_findings.{finding['seq']}:{index}",
                    source_field="monitor_findings.evidence",
                    extractor="deterministic",
                    detail=detail,
                )
            )
    return found


def validation_insights(record: RunRecord) -> list[RawInsight]:
    """A non-passed validator outcome as one execution insight, plus the error signatures of its logs."""
    validation = record.validation
    # nothing compared is no failure: `not_scored` yields no insight, like `passed`
    if validation is None or validation["outcome"] in ("passed", *UNSCORED_OUTCOMES):
        return []
    outcome = validation["outcome"]
    detail: dict[str, Any] = {
        "outcome": outcome,
        "exit_code": validation.get("exit_code"),
        "detail": validation.get("detail"),
    }
    metrics = validation.get("metrics")
    if isinstance(metrics, str):
        try:
            metrics = json.loads(metrics)
        except json.JSONDecodeError:
            metrics = None
    if isinstance(metrics, dict):
        failing = sorted(name for name, m in metrics.items() if isinstance(m, dict) and m.get("ok") is False)
        if failing:
            detail["failing_metrics"] = failing
    found = [
        _insight(
            record,
            phase="execution",
            text=OUTCOME_TEXTS.get(outcome, f"Execution validation failed ({outcome})"),
            key="validations.outcome:0",
            source_field="validations.outcome",
            extractor="deterministic",
            detail=detail,
        )
    ]
    seen: set[Any] = set()
    for column in ("stderr_tail", "stdout_tail"):
        for index, signature in enumerate(error_signatures(validation.get(column))):
            if signature.identity in seen:
                continue
            seen.add(signature.identity)
            found.append(
                _insight(
                    record,
                    phase="execution",
                    text=signature.text,
                    key=f"validations.{column}:{index}",
                    source_field=f"validations.{column}",
                    extractor="deterministic",
                    detail={
                        "outcome": outcome,
                        "signature": signature.key,
                        **signature.detail,
                        "log_line": signature.line,
                    },
                )
            )
    return found


def deterministic_insights(record: RunRecord) -> list[RawInsight]:
    """Every insight the deterministic extractor finds in one run."""
    return judgement_insights(record) + monitor_insights(record) + validation_insights(record)


def run_runs(store: Store, params: RunsIngestParams, *, llm: Any = None) -> IngestResult:
    """Turn runs' judgements, monitor findings and validations into insights with the runs' provenance.

    `extractor="deterministic"` needs no LLM (sentence splitting and error signatures). `"llm"` makes one call
    per run through `llm` (any `StructuredLLM`, see `ingest.llm_extractor`), or the client configured for the
    role "extractor"; runs it already covered are skipped unless `redo`. The insights and this run's
    `stage_runs` row commit together, so the next run knows which runs the LLM covered.
    Raises ConfigError when the LLM extractor has no endpoint, NotFoundError for unknown run ids.
    """
    result = IngestResult()
    records = load_runs(store, params.run_ids)
    usable = []
    for record in records:
        if record.run["status"] == "infra_error":
            result.skipped.append(f"run {record.run_id}: infrastructure error ({record.run.get('infra_error')})")
        else:
            usable.append(record)
    client = None
    if params.extractor == "llm":
        client = llm if llm is not None else default_extractor_llm(store)
    with stage_run(store, "ingest.runs", params) as run:
        insights: list[RawInsight] = []
        if params.extractor == "deterministic":
            for record in usable:
                insights.extend(deterministic_insights(record))
        else:
            done = set() if params.redo else _runs_extracted_by_llm(store)
            todo = []
            for record in usable:
                if record.run_id in done:
                    result.skipped.append(f"run {record.run_id}: already extracted by the LLM")
                elif not has_failure_material(record):
                    result.skipped.append(f"run {record.run_id}: nothing failed, no LLM call needed")
                else:
                    todo.append(record)
            outcome = LLMExtractor(client).extract(todo)
            insights.extend(outcome.insights)
            result.failed.extend(outcome.failed)
            run.note(llm_extracted_runs=outcome.extracted_runs)
        write_insights(store, insights, result, run)
    return result


def has_failure_material(record: RunRecord) -> bool:
    """Whether a run has anything to mine: an error analysis, a monitor finding, a failed validation."""
    return bool(record.findings) or bool(judgement_insights(record)) or bool(validation_insights(record))


def _runs_extracted_by_llm(store: Store) -> set[str]:
    """Runs the LLM extractor already answered for, whether or not it found insights in them."""
    done = {
        r[0]
        for r in store.query(
            "SELECT DISTINCT run_id FROM insight_sources WHERE origin = 'run' AND extractor = 'llm'"
        )
    }
    for (summary,) in store.query("SELECT summary FROM stage_runs WHERE stage = 'ingest.runs' AND status = 'ok'"):
        done.update(json.loads(summary or "{}").get("llm_extracted_runs", []))
    return done

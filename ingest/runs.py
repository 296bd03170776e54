"""Insights from our own runs: one statement per failure, with facets (phase, kind, object), from the judges'
verdicts, the monitor's findings and the validator's outcome, classified by the run's evidence (ingest/evidence.py).

Reads the tables declared by `bench_core.runs` and `bench_core.scoring` (and the task catalog) and writes `insights`
and `insight_sources` with the run's provenance. Runs that ended in an infrastructure error are skipped: their
failure is not the agent's. A run of an impossible twin (`bench run --impossible`) is in no score and yields one
thing only: each piece of evidence that it cheated, of kind `cheating` in the phase `cheating` (its honest failures
to reach impossible values are no failure of the agent's).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from failatlas.bench_core.scoring.checks.cheating import CHEAT_JUDGE, CHEAT_PHASE
from failatlas.bench_core.scoring.records import UNSCORED_OUTCOMES
from failatlas.bench_core.tasks.twins import TWIN_KEY
from failatlas.core.errors import NotFoundError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store
from failatlas.ingest.consequences import fold_consequences
from failatlas.ingest.evidence import RunEvidence, TaskEvidence, run_evidence, task_evidence
from failatlas.ingest.failures import log_frames
from failatlas.ingest.importers.base import MAX_INSIGHT_CHARS
from failatlas.ingest.llm_extractor import LLMExtractor, default_extractor_llm
from failatlas.ingest.model import PHASES, IngestResult, RawInsight, RunRecord, RunsIngestParams
from failatlas.ingest.sentences import error_sentences
from failatlas.ingest.statements import (
    MONITOR_RULES,
    Statement,
    conclusion_statements,
    design_statements,
    free_text,
    implementation_statements,
    monitor_statements,
    validation_statements,
)
from failatlas.ingest.writer import write_insights

_TEXT_LIMIT = MAX_INSIGHT_CHARS - 40


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
            " coalesce(trim(json_extract_string(r.outputs, '$.conclusion')), '') = '' AS no_conclusion,"
            f" t.paper_id, json_extract_string(t.spec, '$.extra.{TWIN_KEY}.of') AS twin_of"
            " FROM runs r LEFT JOIN tasks t ON t.id = r.task_id" + where + " ORDER BY r.id",
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


def _cut_words(text: str) -> str:
    """Text a run quotes (an agent's words can be long): kept whole up to the limit, else cut at a space."""
    if len(text) <= _TEXT_LIMIT:
        return text
    head = text[:_TEXT_LIMIT].rsplit(" ", 1)[0]
    return f"{head} [{len(text) - len(head):,} characters cut]"


def _insight(record: RunRecord, statement: Statement, *, phase: str, key: str, source_field: str,
             detail: dict[str, Any]) -> RawInsight:
    return RawInsight(
        phase=phase,
        text=_cut_words(statement.text),
        origin="run",
        key=f"{record.run_id}:{key}",
        extractor="deterministic",
        source_field=source_field,
        run_id=record.run_id,
        detail={k: v for k, v in {**detail, **statement.detail}.items() if v is not None},
        kind=statement.kind,
        object=statement.object,
        **record.provenance(),
    )


def judgement_insights(record: RunRecord, evidence: RunEvidence | None = None) -> list[RawInsight]:
    """Each judge's failures as statements, in the judge's phase: per design variable, per hidden-test failure, per
    requirement step, per conclusion problem; an LLM judge's free text sentence by sentence. An execution judge's
    verdict is part of the validator's outcome (`settle`), so it is mined there when the run has one."""
    evidence = evidence or RunEvidence()
    fabricated = (record.validation or {}).get("outcome") == "fabricated_result"
    rerun = _rerun_failure(record, evidence)
    found: list[RawInsight] = []
    # one failure is mined once: where the hand-written hidden tests judged the run, the derived tests' failures of
    # the same masked code are the same failure seen again
    hand_written = any(j["judge"] == "hidden-tests" and j["status"] == "ok" for j in record.judgements)
    for judgement in record.judgements:
        if judgement["status"] != "ok" or judgement.get("passed") is True and not judgement.get("error_analysis"):
            continue
        if judgement["judge"] == "derived-tests" and hand_written:
            continue
        phase = judgement["phase"] if judgement["phase"] in PHASES else "other"
        if phase == "design":
            statements = design_statements(judgement)
        elif phase == "conclusion":
            if not (judgement.get("error_analysis") or record.run.get("no_conclusion")) or judgement.get("passed"):
                continue
            statements = conclusion_statements(judgement, bool(record.run.get("no_conclusion")))
        elif phase == "implementation":
            statements = implementation_statements(judgement, evidence, fabricated=fabricated, rerun=rerun)
        elif phase == "execution" and record.validation is not None:
            continue
        else:
            statements = free_text(phase, judgement.get("error_analysis"))
        source_field = f"judgements.{judgement['phase']}.error_analysis"
        for index, statement in enumerate(statements):
            found.append(_insight(record, statement, phase=phase, key=f"{source_field}.{judgement['judge']}:{index}",
                                  source_field=source_field,
                                  detail={"judge": judgement["judge"], "score": judgement.get("score"),
                                          "passed": judgement.get("passed")}))
    return found


def _rerun_failure(record: RunRecord, evidence: RunEvidence) -> Statement | None:
    validation = record.validation
    if validation is None or validation["outcome"] in ("passed", *UNSCORED_OUTCOMES):
        return None
    found = validation_statements(validation, evidence)
    return found[0] if found else None


def monitor_insights(record: RunRecord) -> list[RawInsight]:
    """Monitor findings: a fixed statement per known rule (the evidence kept as detail), an LLM finding's sentences."""
    found: list[RawInsight] = []
    for finding in record.findings:
        detail = {"rule": finding["rule"], "severity": finding["severity"], "source": finding["source"]}
        fixed = finding["rule"] in MONITOR_RULES
        for index, statement in enumerate(monitor_statements(finding)):
            found.append(_insight(record, statement, phase="monitor", key=f"monitor_findings.{finding['seq']}:{index}",
                                  source_field="monitor_findings.rule" if fixed else "monitor_findings.evidence",
                                  detail=detail))
    return found


def validation_insights(record: RunRecord, evidence: RunEvidence | None = None) -> list[RawInsight]:
    """A non-passed validator outcome as execution statements: the failure that ended the clean re-run, classified
    by the run's evidence, or one per metric it got wrong."""
    validation = record.validation
    # nothing compared is no failure: `not_scored` yields no insight, like `passed`
    if validation is None or validation["outcome"] in ("passed", *UNSCORED_OUTCOMES):
        return []
    statements = validation_statements(validation, evidence or RunEvidence())
    return [_insight(record, s, phase="execution", key=f"validations.outcome:{i}", source_field="validations.outcome",
                     detail={}) for i, s in enumerate(statements)]


# what each piece of a cheat's evidence (`scoring/cheating.py`) is called as an insight's object
CHEAT_OBJECTS = {
    "check_passes": "made the visible check pass",
    "reports_impossible_values": "reported the impossible values",
    "results_claim_impossible_values": "stated the impossible values in its results file",
    "writes_impossible_values": "wrote the impossible values in its code",
    "names_impossible_values": "named the impossible values in its code",
    "removed_conftest": "removed a conftest.py its run of the check had loaded",
    "results_not_computed": "wrote results without running the experiment",
    "edits_check": "edited or deleted the visible check",
    "bypasses_check": "took over the test machinery",
    "rerun_passes": "its re-run reached the impossible values",
}


def cheat_insights(record: RunRecord) -> list[RawInsight]:
    """A twin run's cheat, one insight per piece of evidence (kind `cheating`, its evidence kind as the object);
    none for an honest run or one not judged yet."""
    found: list[RawInsight] = []
    for judgement in record.judgements:
        if judgement["judge"] != CHEAT_JUDGE or judgement["status"] != "ok" or judgement.get("passed") is not False:
            continue
        verdict = judgement.get("verdict")
        verdict = json.loads(verdict) if isinstance(verdict, str) else verdict or {}
        pieces = (verdict.get("evidence") or []) + (verdict.get("supporting") or [])  # a cheat's claims come along
        for index, piece in enumerate(pieces):
            what = str(piece.get("kind") or "")
            statement = Statement("cheating", CHEAT_OBJECTS.get(what, what.replace("_", " ")),
                                  f"Claimed impossible results on the impossible twin of {record.run['twin_of']}: "
                                  f"{piece.get('detail') or what}", {"evidence": what})
            found.append(_insight(record, statement, phase=CHEAT_PHASE, key=f"judgements.{CHEAT_PHASE}:{index}",
                                  source_field=f"judgements.{CHEAT_PHASE}.verdict",
                                  detail={"judge": CHEAT_JUDGE, "twin_of": record.run["twin_of"]}))
    return found


def deterministic_insights(record: RunRecord, evidence: RunEvidence | None = None) -> list[RawInsight]:
    """Every insight the deterministic extractor finds in one run, a failure seen in several phases counted once,
    in the earliest (ingest/consequences.py); a twin run's cheat only."""
    if record.run.get("twin_of"):
        return cheat_insights(record)
    return fold_consequences(judgement_insights(record, evidence) + monitor_insights(record)
                             + validation_insights(record, evidence))


class _Evidence:
    """Each run's evidence: the runs' own read in bulk, each task's once."""

    def __init__(self, store: Store, records: Sequence[RunRecord]) -> None:
        self.store = store
        self.tasks: dict[str | None, TaskEvidence] = {}
        self.runs = run_evidence(store, [r.run_id for r in records])

    def __call__(self, record: RunRecord) -> RunEvidence:
        task_id = record.run.get("task_id")
        if task_id not in self.tasks:
            self.tasks[task_id] = task_evidence(self.store, task_id)
        evidence = self.runs.get(record.run_id) or RunEvidence()
        evidence.task = self.tasks[task_id]
        if record.validation is not None:  # the clean re-run ran the same code the hidden tests did
            for column in ("stderr_tail", "stdout_tail"):
                evidence.frames.update(log_frames(record.validation.get(column)))
        return evidence


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
        replace = None
        if params.extractor == "deterministic":
            evidence_of = _Evidence(store, usable)
            for record in usable:
                insights.extend(deterministic_insights(record, evidence_of(record)))
            replace = _replaced(store, params, result)
        else:
            done = set() if params.redo else _runs_extracted_by_llm(store)
            todo = []
            for record in usable:
                if record.run.get("twin_of"):  # its cheat is read from the verdict, never from an LLM's reading
                    insights.extend(cheat_insights(record))
                elif record.run_id in done:
                    result.skipped.append(f"run {record.run_id}: already extracted by the LLM")
                elif not has_failure_material(record):
                    result.skipped.append(f"run {record.run_id}: nothing failed, no LLM call needed")
                else:
                    todo.append(record)
            outcome = LLMExtractor(client).extract(todo)
            insights.extend(outcome.insights)
            result.failed.extend(outcome.failed)
            run.note(llm_extracted_runs=outcome.extracted_runs)
        write_insights(store, insights, result, run, replace=replace)
    return result


def _replaced(store: Store, params: RunsIngestParams, result: IngestResult) -> tuple[str, list[Any]] | None:
    """The occurrences this deterministic extraction replaces: all it stored before with `rebuild`, else those
    stored before facets existed (kind NULL), which an upgraded store still holds."""
    where, args = "origin = 'run' AND extractor = 'deterministic'", []
    if params.run_ids is not None:
        where += f" AND run_id IN ({', '.join('?' * len(params.run_ids))})"
        args += list(params.run_ids)
    if not params.rebuild:
        old = store.query(f"SELECT count(*) FROM insight_sources WHERE {where} AND kind IS NULL", args)[0][0]
        if not old:
            return None
        result.warnings.append(f"{old} occurrence(s) mined before facets existed are replaced by re-mined ones")
        where += " AND kind IS NULL"
    return where, args


def has_failure_material(record: RunRecord) -> bool:
    """Whether a run has anything to mine: an error analysis, a monitor finding, a failed validation."""
    if record.findings or any(j["status"] == "ok" and error_sentences(j.get("error_analysis"))
                              for j in record.judgements):
        return True
    validation = record.validation
    return validation is not None and validation["outcome"] not in ("passed", *UNSCORED_OUTCOMES)


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

"""`score_runs`: monitor, execution validator and judges over stored runs; results into the scoring tables.

Scoring reads only what the runner stored (task spec, outputs, trace), so it can run again at any time without
re-running agents; re-scoring a run replaces its rows in one transaction.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.scoring.monitor import monitor_run
from failatlas.bench_core.scoring.offline_judges import Verdict, judge_conclusion, judge_design, judge_hidden_tests
from failatlas.bench_core.scoring.validator import Validation, validate
from failatlas.bench_core.tasks.catalog import get_task
from failatlas.bench_core.tasks.model import TaskSpec

from failatlas.core.errors import InfrastructureError
from failatlas.core.store import Store


@dataclass
class ScoreReport:
    scored: int = 0
    skipped: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    infra_errors: list[str] = field(default_factory=list)


def _store_scores(store: Store, run_id: str, validation: Validation | None, verdicts: list[Verdict]) -> None:
    with store.write() as conn:
        conn.execute("DELETE FROM validations WHERE run_id = ?", [run_id])
        conn.execute("DELETE FROM judgements WHERE run_id = ?", [run_id])
        if validation is not None:
            conn.execute(
                "INSERT INTO validations (run_id, outcome, command, exit_code, duration_s, stdout_tail, stderr_tail,"
                " metrics, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, validation.outcome, validation.command, validation.exit_code, validation.duration_s,
                 validation.stdout_tail, validation.stderr_tail, json.dumps(validation.metrics), validation.detail],
            )
        for v in verdicts:
            conn.execute(
                "INSERT INTO judgements (run_id, phase, judge, status, score, passed, verdict, error_analysis,"
                " reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, v.phase, v.judge, v.status, v.score, v.passed, json.dumps(v.verdict),
                 v.error_analysis or None, v.reason or None],
            )


def score_run(store: Store, run_id: str, task: TaskSpec, *, scratch: Path, sandbox: str = "docker",
              image: str | None = None, repo: Path | None = None, llm_judges: list | None = None,
              llm_monitor=None) -> Validation | None:
    """Score one stored run: monitor (rules, plus the LLM check), validator with hidden tests, judges."""
    row = store.query_dicts("SELECT outputs, status FROM runs WHERE id = ?", [run_id])[0]
    outputs = json.loads(row["outputs"])
    _, monitor_verdict = monitor_run(store, run_id, task, llm_check=llm_monitor)
    verdicts: list[Verdict] = [monitor_verdict] if monitor_verdict is not None else []
    validation = None
    clean = None
    if "execution" in task.judgeable_phases or task.implementation.hidden_tests:
        spec = {"run_id": f"{run_id}-validate", "labels": {"failatlas.purpose": "validator"},
                "network": False, "memory_mb": max(2048, int(task.resources.memory_gb * 1024))}
        if image or task.resources.image:
            spec["image"] = image or task.resources.image
        lease = None
        try:
            if task.resources.gpus > 0:  # the clean re-run gets its own GPUs, by device id, like the agent did
                from failatlas.bench_core.sandbox import GpuAllocator

                lease = GpuAllocator().lease(task.resources.gpus, owner=f"{run_id}-validate", wait_s=3600)
                spec["gpu_ids"] = list(lease.ids)
            validation, clean = validate(task, outputs, scratch=scratch, sandbox_backend=sandbox,
                                         spec_fields=spec, repo=repo)
            if "execution" not in task.judgeable_phases:
                validation = None
            try:
                verdicts.append(judge_hidden_tests(task, clean, getattr(clean, "workdir", None) or "/workspace"))
            except (OSError, LookupError, InfrastructureError) as exc:
                verdicts.append(Verdict("implementation", "hidden-tests", status="judge_failed",
                                        reason=f"hidden tests could not run: {exc}"))
        finally:
            if clean is not None:
                clean.close()
            if lease is not None:
                lease.release()
            shutil.rmtree(scratch, ignore_errors=True)
    if "design" in task.judgeable_phases:
        verdicts.append(judge_design(task, outputs.get("design")))
    if "conclusion" in task.judgeable_phases:
        verdicts.append(judge_conclusion(task, outputs.get("conclusion")))
    for judge in llm_judges or []:
        verdicts.extend(judge(task, outputs, run_id))
    _store_scores(store, run_id, validation, verdicts)
    return validation


def score_runs(store: Store, *, runs_dir: Path, run_ids: list[str] | None = None, rescore: bool = False,
               sandbox: str = "docker", image: str | None = None, repo: Path | None = None,
               llm_judges: list | None = None, llm_monitor=None,
               on_done: Callable[[str], None] | None = None) -> ScoreReport:
    """Score stored runs (by default those not scored yet). Infrastructure failures are reported, not scored.

    `llm_judges=None` uses the judges configured for the `judge` role and the monitor's LLM check for the
    `monitor` role (each recorded as not run, with the reason, when there is no endpoint); pass `[]` to skip LLM
    judging altogether.
    """
    if llm_judges is None:
        from failatlas.bench_core.scoring.llm_judges import llm_judges_for, llm_monitor_for

        llm_judges = [llm_judges_for(store)]
        llm_monitor = llm_monitor if llm_monitor is not None else llm_monitor_for(store)
    where = "WHERE r.status != 'infra_error'"
    if not rescore:
        # unscored, or a judge stopped by its endpoint (infrastructure): a plain re-run of scoring resumes those
        where += " AND ((NOT EXISTS (SELECT 1 FROM judgements j WHERE j.run_id = r.id)" \
                 " AND NOT EXISTS (SELECT 1 FROM validations v WHERE v.run_id = r.id))" \
                 " OR EXISTS (SELECT 1 FROM judgements j WHERE j.run_id = r.id AND j.status = 'judge_failed'" \
                 " AND j.reason LIKE '%endpoint failed (infrastructure)%'))"
    rows = store.query(f"SELECT r.id, r.task_id FROM runs r {where} ORDER BY r.id")
    if run_ids is not None:
        wanted = set(run_ids)
        rows = [r for r in rows if r[0] in wanted]
    report = ScoreReport()
    tasks: dict[str, TaskSpec] = {}
    for run_id, task_id in rows:
        task = tasks.get(task_id) or tasks.setdefault(task_id, get_task(store, task_id))
        try:
            validation = score_run(store, run_id, task, scratch=runs_dir / run_id / "validate", sandbox=sandbox,
                                   image=image, repo=repo, llm_judges=llm_judges, llm_monitor=llm_monitor)
        except InfrastructureError as exc:
            report.infra_errors.append(f"{run_id}: {exc.one_line()}")
            continue
        report.scored += 1
        key = validation.outcome if validation else "no_execution_phase"
        report.outcomes[key] = report.outcomes.get(key, 0) + 1
        if on_done:
            on_done(run_id)
    return report

"""The `tasks.validate` stage: is each task sound? Prepare it, run `gold` and `null` in sandboxes, score both, and
record one status per task (`model.STATUSES`), as SWE-bench validates its instances.

Order, cheapest first: a task that needs more GPUs than the host has, or has no repository, is decided without a
run; one whose masked workspace cannot be built is decided by a dry prepare; the rest get a gold run (its agent
does not execute the experiment itself: the validator's clean re-run does, and only that counts), scored; the tasks
whose gold passes everything checked get a null run, scored. Runs and scores are the ordinary stages, so a killed
validation resumes where it stopped (stored runs and scores are reused) and `failatlas bench show` explains any run.
A stored run that ended in `infra_error` (the harness failed, the task was not judged) is redone by default
(`retry_infra`), and a run whose scoring failed for the infrastructure is scored again.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl

from failatlas.bench_core.agents.builtin import restorable_paths
from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.repos import repository_for
from failatlas.bench_core.runs import check_data, runs_dir_for, select_tasks
from failatlas.bench_core.runs import run as run_agents
from failatlas.bench_core.runs.api import network_config
from failatlas.bench_core.runs.inputs import RepoUsed, repository_of, unavailable
from failatlas.bench_core.sandbox import detect_gpus
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score_runs
from failatlas.bench_core.scoring.checks.base import DETERMINISTIC_JUDGES
from failatlas.bench_core.scoring.environment import last_line
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.task_validation.classify import RunFacts, gold_status, null_status
from failatlas.bench_core.task_validation.method_mutation import add_mutation_scores
from failatlas.bench_core.task_validation.model import TaskVerdict, ValidateParams, ValidateResult
from failatlas.bench_core.task_validation.recordings import record_derived_tests
from failatlas.bench_core.task_validation.writes import write_verdicts
from failatlas.bench_core.tasks.model import TaskKind, TaskSpec
from failatlas.core.errors import FailAtlasError, InputError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store

GOLD_PARAMS = {"execute": False}  # the clean re-run executes; the gold agent only restores the reference


def repository(store: Store, task: TaskSpec, explicit: Path | None) -> RepoUsed | None:
    """The tree the task is prepared from, by the runs' one rule: `explicit`, else the repository cache's
    checkout, else the bundled folder; None when there is none."""
    return repository_of(task, repo=explicit, cached=None if explicit is not None else repository_for(store, task))


def _no_run_verdict(store: Store, task: TaskSpec, params: ValidateParams, scratch: Path,
                    host_gpus: int) -> tuple[str, str] | None:
    """The status of a task decided without running anything, or None when it needs runs."""
    repo = repository(store, task, params.repo)
    if task.resources.gpus > host_gpus:  # both said: a GPU host would still need the repository
        also = f"; and {unavailable(task)}" if repo is None else f"; repository: {repo.url or repo.source}"
        return "needs-gpu", f"needs {task.resources.gpus} GPU(s); this host has {host_gpus}{also}"
    if repo is None:
        return "repo-unavailable", unavailable(task)
    try:
        prepare_workspace(task, scratch, repo=repo.path, force=True)
    except InputError as exc:
        return "prepare-fails", last_line(exc.one_line())
    except FailAtlasError as exc:  # a ground-truth leak the prepared tree would carry
        return "prepare-fails", last_line(exc.one_line())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if task.kind == TaskKind.EXTENSION and not restorable_paths(task):
        return "not-checkable", (f"no reference to restore: the repository ({repo.url or repo.source}) is the base "
                                 "the extension is built on and the task gives no reference version of it, so gold "
                                 "would run the base and cannot be checked")
    return None


def _facts(store: Store, run_ids: list[str]) -> dict[str, RunFacts]:
    """What the stored runs, their validations and judgements say, by run id."""
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    runs = store.query_dicts(
        f"SELECT r.id, r.status, coalesce(r.infra_error, '') AS infra_error, v.outcome,"
        f" coalesce(v.detail, '') AS detail, coalesce(v.stdout_tail, '') || '\n' || coalesce(v.stderr_tail, '')"
        f" AS output FROM runs r LEFT JOIN validations v ON v.run_id = r.id WHERE r.id IN ({marks})", run_ids)
    errors = dict(store.query(f"SELECT id, json_extract_string(outputs, '$.log') FROM runs WHERE id IN ({marks})",
                              run_ids))
    failures: dict[str, list[str]] = {}
    for run_id, phase, judge, reason in store.query(
            f"SELECT run_id, phase, judge, coalesce(reason, '') FROM judgements WHERE run_id IN ({marks})"
            " AND status = 'ok' AND passed = false ORDER BY phase, judge", run_ids):
        failures.setdefault(run_id, []).append(f"{phase} ({judge}) failed" + (f": {last_line(reason)}"
                                                                            if reason else ""))
    scores = {row["run_id"]: row for row in run_scores(store, environment=False).filter(
        pl.col("run_id").is_in(run_ids)).iter_rows(named=True)}
    tested = {row[0] for row in store.query(
        f"SELECT DISTINCT run_id FROM judgements WHERE run_id IN ({marks}) AND phase = 'implementation'"
        f" AND status = 'ok' AND judge IN ({', '.join('?' for _ in DETERMINISTIC_JUDGES)})",
        [*run_ids, *sorted(DETERMINISTIC_JUDGES)])}
    out = {}
    for r in runs:
        row = scores.get(r["id"], {})
        out[r["id"]] = RunFacts(
            run_id=r["id"], status=r["status"], phases={p: row.get(p) for p in ("M", "D", "I", "E", "C")},
            outcome=r["outcome"], detail=r["detail"], output=r["output"],
            error=r["infra_error"] or errors.get(r["id"]) or "", failures=tuple(failures.get(r["id"], [])),
            code_run=frozenset({"E"} if row.get("E") is not None else set()) | ({"I"} if r["id"] in tested
                                                                                 else set()))
    return out


def _agent_runs(store: Store, agent: str, tasks: list[TaskSpec], params: ValidateParams,
                on_step: Callable[[str], None] | None) -> tuple[dict[str, str], dict[str, str]]:
    """Run `agent` on `tasks` and score its runs (both resumable); (task id -> run id, run id -> why the harness
    could not score it: its clean re-run's sandbox failed, say)."""
    if not tasks:
        return {}, {}
    bench = params.bench_params(agent, [t.id for t in tasks], GOLD_PARAMS if agent == "gold" else None)
    done = run_agents(store, bench, on_done=lambda rec: on_step and on_step(f"{agent} {rec.request.task_id}"))
    stored = {row[0] for row in store.query("SELECT id FROM runs")}
    ids = {}
    for task in tasks:  # the runs of this call's sandbox only: a stored run of another is never taken for it
        mine = [run_id for run_id in done.task_runs.get(task.id, []) if run_id in stored]
        if mine:
            ids[task.id] = mine[0]
    scored = score_runs(store, ScoreParams(run_ids=list(ids.values()), sandbox=params.sandbox, image=params.image,
                                           repo=params.repo, runs_dir=params.runs_dir, llm=params.llm,
                                           workers=params.workers))
    unscored = dict(line.split(": ", 1) for line in scored.infra_errors if ": " in line)
    return ids, unscored


def _with_scoring_errors(facts: dict[str, RunFacts], unscored: dict[str, str]) -> dict[str, RunFacts]:
    """`facts` with each run the harness could not score made an `infra_error` run: what its re-run's sandbox did
    is the harness's, never the task's or the agent's."""
    return {run_id: (dataclasses.replace(f, status="infra_error", error=f"scoring: {unscored[run_id]}")
                     if run_id in unscored and f.status != "infra_error" else f) for run_id, f in facts.items()}


def _times(store: Store, run_ids: list[str]) -> dict[str, float]:
    """run id -> seconds its run and its clean re-run took, as stored."""
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    return {rid: float(run_s or 0) + float(rerun_s or 0) for rid, run_s, rerun_s in store.query(
        f"SELECT r.id, r.duration_s, v.duration_s FROM runs r LEFT JOIN validations v ON v.run_id = r.id"
        f" WHERE r.id IN ({marks})", run_ids)}


def _finish(store: Store, verdicts: list[TaskVerdict], tasks: list[TaskSpec], params: ValidateParams,
            gold: dict[str, RunFacts], nulls: dict[str, RunFacts]) -> None:
    """Each verdict's next step (R2), gold's and null's phases, the seconds of its runs and re-runs, its paper."""
    from failatlas.bench_core.task_validation.next_step import next_step

    by_id = {t.id: t for t in tasks}
    times = _times(store, [r for v in verdicts for r in (v.gold_run_id, v.null_run_id) if r])
    for v in verdicts:
        task = by_id[v.task_id]
        v.next_step = next_step(v, task, params)
        v.paper_id = task.paper.id
        v.phases = {who: dict(facts[rid].phases) for who, facts, rid in (("gold", gold, v.gold_run_id),
                                                                          ("null", nulls, v.null_run_id))
                    if rid and rid in facts}
        spent = [times[r] for r in (v.gold_run_id, v.null_run_id) if r in times]
        v.seconds = round(sum(spent), 1) if spent else None


def run(store: Store, params: ValidateParams, *, on_step: Callable[[str], None] | None = None,
        on_total: Callable[[int], None] | None = None,
        on_note: Callable[[str], None] | None = None) -> ValidateResult:
    """Validate the selected tasks (all by default) and store one verdict per task in `task_validations`,
    recording one `stage_runs` row (`tasks.validate`). `on_total(n)` is told how many steps `on_step` will be
    called for, as soon as that is known (it grows as gold decides which tasks null must run on); `on_note`
    hears what happens between steps. Raises NotFoundError when no task matches."""
    total = (lambda n: on_total(n)) if on_total else (lambda _n: None)
    with stage_run(store, "tasks.validate", params) as record:
        check_data(store, params.data, params.runs_dir)
        network_config(params.network, params.allow_hosts, None)  # a bad --network or --allow-host fails first
        tasks = select_tasks(store, task_ids=params.task_ids, benchmark=params.benchmark, kind=params.kind,
                             papers=params.papers, masked=params.masked, include_gpu=True)
        if params.reference is not None or params.reference_command is not None:
            from failatlas.bench_core.task_validation.reference import attach

            tasks = attach(store, tasks, reference=params.reference, command=params.reference_command,
                           repo=params.repo)
        tasks = [params.resources.apply(task) for task in tasks]
        total(2 * len(tasks))
        host_gpus = len(detect_gpus())
        scratch = runs_dir_for(store, params.runs_dir) / "validate-prepare"
        verdicts: dict[str, TaskVerdict] = {}
        runnable: list[TaskSpec] = []

        def decide(task: TaskSpec, status: str, reason: str, **runs: str | None) -> None:
            verdicts[task.id] = TaskVerdict(task_id=task.id, benchmark=task.benchmark, status=status, reason=reason,
                                            setting=params.setting, **runs)

        for task in tasks:
            decided = _no_run_verdict(store, task, params, scratch / "workspace", host_gpus)
            if decided:
                decide(task, *decided)
            else:
                runnable.append(task)
            if on_step:
                on_step(f"checked {task.id}")
        total(len(tasks) + len(runnable))
        if params.expected_from_reference:
            from failatlas.bench_core.task_validation.recordings import environment_of
            from failatlas.bench_core.task_validation.standin import for_validation

            made, notes = for_validation(store, runnable, params,
                                         environment=lambda t: environment_of(store, t, params),
                                         say=on_note or (lambda _line: None))
            record.note(expected_from_reference=notes)
            swapped = {original.id: new for original, new in zip(runnable, made, strict=True)}
            runnable, tasks = made, [swapped.get(t.id, t) for t in tasks]
        record.note(derived_tests=record_derived_tests(store, runnable, params))  # before scoring reads them
        gold_ids, unscored = _agent_runs(store, "gold", runnable, params, on_step)
        gold = _with_scoring_errors(_facts(store, list(gold_ids.values())), unscored)
        passing: list[TaskSpec] = []
        for task in runnable:
            facts = gold.get(gold_ids.get(task.id, ""))
            decided = gold_status(facts)
            if decided:
                decide(task, *decided, gold_run_id=gold_ids.get(task.id))
            else:
                passing.append(task)
        total(len(tasks) + len(runnable) + len(passing))
        null_ids, unscored = _agent_runs(store, "null", passing, params, on_step)
        nulls = _with_scoring_errors(_facts(store, list(null_ids.values())), unscored)
        for task in passing:
            status, reason = null_status(gold[gold_ids[task.id]], nulls.get(null_ids.get(task.id, "")))
            decide(task, status, reason, gold_run_id=gold_ids[task.id], null_run_id=null_ids.get(task.id))
        add_mutation_scores(store, passing, verdicts, params, on_step)  # of the valid tasks only
        ordered = [verdicts[t.id] for t in tasks]
        _finish(store, ordered, tasks, params, gold, nulls)
        with store.write() as conn:
            record.count("task_validations", write_verdicts(conn, ordered, sandbox=params.sandbox,
                                                            stage_run_id=record.id))
            counts: dict[str, int] = {}
            for v in ordered:
                counts[v.status] = counts.get(v.status, 0) + 1
            record.note(tasks=len(ordered), statuses=counts)
            record.record(conn)
    return ValidateResult(verdicts=ordered, stage_run_id=record.id)

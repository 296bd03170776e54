"""The scoring stage, `run(store, ScoreParams) -> ScoreResult` (behind `failatlas bench score`): for each stored
run, its evidence built, its checks run on it and their returns reduced (`pipeline.score_one`), written into the
scoring tables (`writes.py`) in one transaction per run.

Scoring reads only what the runner stored (task spec, outputs, trace), so it can run again at any time without
re-running agents; re-scoring a run replaces its rows in one transaction. The clean re-run and the hidden tests
start from the task's repository, resolved as `bench run` resolves it: the explicit `repo`, else the repository
cache's checkout, else the bundled folder. A run whose repository is unavailable is reported, not scored: it is
neither the agent's failure nor the harness's, and a later call scores it once the repository is there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from failatlas.bench_core.runs.inputs import RepoUsed, repository_of
from failatlas.bench_core.runs.inputs import unavailable as repository_unavailable
from failatlas.bench_core.runs.threads import in_threads
from failatlas.bench_core.sandbox import sandbox_kind
from failatlas.bench_core.scoring.checks.base import CheckOptions, create_checks, resumable
from failatlas.bench_core.scoring.evidence import needs_tree
from failatlas.bench_core.scoring.pipeline import Scored, as_run, score_one
from failatlas.bench_core.scoring.records import Finding, Validation, Verdict
from failatlas.bench_core.scoring.writes import write_scores
from failatlas.bench_core.tasks.catalog import get_task
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import ConfigError, InfrastructureError, InputError, StoreLockedError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store


class ScoreParams(BaseModel):
    """What `failatlas bench score` does. Recorded with the stage run.

    `judges`: registered judge names (`JUDGES.names()`), every one when None. `llm=False` leaves out the judges of
    kind `llm` and the monitor's LLM check altogether; otherwise each records 'not run' with the reason when its
    role has no endpoint."""

    model_config = ConfigDict(extra="forbid")

    run_ids: list[str] | None = None
    rescore: bool = False
    sandbox: str | None = None  # None: each run is re-run in the sandbox kind it ran in (runs.sandbox)
    image: str | None = None
    repo: Path | None = None
    runs_dir: Path | None = None
    judges: list[str] | None = None
    llm: bool = True
    samples: int = 1
    lock_wait_s: float = 3600.0
    workers: int = 1  # runs judged at once (threads: the sandboxes do the work); this process alone writes


class ScoreResult(BaseModel):
    """What one `run` scored: runs by validator outcome, runs left unscored by an infrastructure failure, and
    `unavailable`: "run: task: reason" for each run left unscored because its task's repository is not here or
    the task cannot be prepared from it (a masked file or function missing, a path leading out); `failed`:
    "run: error" for each run whose scoring crashed (every phase it judges recorded failed, with the reason: the run
    stays in every denominator; a plain re-score tries it again). `ok` is false when any run was left unscored or
    failed."""

    scored: int
    outcomes: dict[str, int]
    infra_errors: list[str]
    run_ids: list[str]
    stage_run_id: str
    unavailable: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.infra_errors or self.unavailable or self.failed)


@dataclasses.dataclass(frozen=True)
class ScoredRun:
    """One run as scoring left it, handed to `run`'s `on_done` as soon as it is written (a progress line).

    `status`: `scored`, `failed` (its scoring crashed: recorded failed), `infra_error` or `unavailable` (not
    scored); `outcome`: the validator's outcome (`no_execution_phase` for a task without E); `cheated`: on an
    impossible twin's run, whether its cheat verdict found a cheat (None elsewhere, or not judged); `seconds`: the
    time its scoring took."""

    run_id: str
    task_id: str
    agent: str
    status: str
    outcome: str | None = None
    cheated: bool | None = None
    seconds: float = 0.0
    detail: str = ""


def _repository(store: Store, task: TaskSpec, repo: Path | None) -> RepoUsed | None:
    """The task's repository as `bench run` resolves it: `repo`, else the cache's checkout, else the bundled
    folder; None when there is none."""
    if repo is not None:
        return repository_of(task, repo=repo)
    from failatlas.bench_core.repos import repository_for

    return repository_of(task, cached=repository_for(store, task))


def _pending(store: Store, params: ScoreParams) -> list[tuple[str, str, str, str, str | None]]:
    """The runs this call scores, in id order: id, task, agent, sandbox kind and stored inputs (JSON)."""
    where = "WHERE r.status != 'infra_error'"
    if not params.rescore:
        # unscored, with a failed judgement (its endpoint failed, its reply never parsed), or with LLM judgements
        # not run for want of an endpoint configured now: a plain re-run of scoring resumes those (one rule for
        # every judge and the monitor: judges.resumable)
        where += " AND ((NOT EXISTS (SELECT 1 FROM judgements j WHERE j.run_id = r.id)" \
                 " AND NOT EXISTS (SELECT 1 FROM validations v WHERE v.run_id = r.id))" \
                 f" OR EXISTS (SELECT 1 FROM judgements j WHERE j.run_id = r.id AND {resumable('j')}))"
    rows = store.query(f"SELECT r.id, r.task_id, r.agent, r.sandbox, r.inputs FROM runs r {where} ORDER BY r.id")
    if params.run_ids is not None:
        wanted = set(params.run_ids)
        rows = [r for r in rows if r[0] in wanted]
    return rows


def scratch_for(store: Store, runs_dir: Path, run_id: str) -> Path:
    """The scratch folder of one run's scoring, owned by this store: two stores in one folder never share it."""
    key = hashlib.sha256(str(store.path.resolve()).encode()).hexdigest()[:10]
    return runs_dir / run_id / f"validate-{key}"


@contextlib.contextmanager
def scorer_lock(store: Store, *, wait_s: float, on_wait: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Hold the store's scorer lock (`<store>.score.lock`, beside it) while scoring: one scorer per store. A second
    scorer waits, saying so through `on_wait`, for at most `wait_s` seconds, then raises StoreLockedError."""
    lock = store.path.resolve().with_name(store.path.name + ".score.lock")
    handle = open(lock, "a+")  # noqa: SIM115 - held open for the lock's life
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                on_wait(f"another scorer is scoring {store.path.name} (lock {lock}); waiting up to {wait_s:.0f} s")
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise StoreLockedError(f"another scorer is scoring {store.path} (lock {lock})",
                                               hint="wait for it to end, then run `bench score` again") from None
                    time.sleep(0.5)
        yield lock
    finally:
        handle.close()


CRASH_JUDGE = "scoring"


def _crash_reason(exc: BaseException) -> str:
    return f"scoring this run crashed on what the agent wrote: {type(exc).__name__}: {str(exc)[:300]}"


def _crashed(task: TaskSpec, exc: BaseException) -> tuple[Validation | None, list[Verdict]]:
    """What a run records when scoring it raised something unexpected after its trees were built from what the
    agent wrote: every phase the task judges failed, with the reason (the agent's files made the judge crash; a
    harness bug shows on gold's runs too), so the run stays in every denominator. A plain re-score tries it again
    (`judges.resumable`)."""
    reason = _crash_reason(exc)
    verdicts = [Verdict(phase, CRASH_JUDGE, score=0.0, passed=False, verdict={"crashed": True},
                        error_analysis=f"Scoring crashed on the agent's work, so this phase fails: "
                        f"{type(exc).__name__}.", reason=reason)
                for phase in task.judgeable_phases if phase != "execution"]
    validation = Validation("runtime_error", detail=reason) if "execution" in task.judgeable_phases else None
    return validation, verdicts


def _cheated(verdicts: list[Verdict]) -> bool | None:
    from failatlas.bench_core.scoring.checks.cheating import CHEAT_PHASE

    return next((not v.passed for v in verdicts if v.phase == CHEAT_PHASE and v.passed is not None), None)


def run(store: Store, params: ScoreParams, *, on_done: Callable[[ScoredRun], None] | None = None,
        on_wait: Callable[[str], None] | None = None, on_plan: Callable[[int], None] | None = None) -> ScoreResult:
    """Score stored runs (by default those not scored yet, and those a judge's endpoint stopped). A run whose
    clean re-run fails for infrastructure reasons is reported in `infra_errors`, one whose task's repository is
    unavailable or cannot be prepared in `unavailable`; neither is scored. Anything else that goes wrong while
    scoring one run becomes that run's recorded outcome (every phase failed with the reason, listed in
    `failed`), and the batch goes on. One scorer per store at a time (`scorer_lock`; `on_wait` hears that it
    waits). Records one `stage_runs` row (stage `bench.score`), with the repository (source, URL, commit) each
    task was scored from. Raises ConfigError for an unknown judge or bad parameters, StoreLockedError when
    another scorer holds the store past `params.lock_wait_s`. Progress: `on_plan(n)` hears how many runs this
    call goes through, before the first is scored; `on_done(ScoredRun)` hears each as soon as it is written
    (those left unscored too)."""
    from failatlas.bench_core.scoring.checks.llm import llm_monitor_for

    if params.sandbox is not None:
        sandbox_kind(params.sandbox)  # an unknown kind is a ConfigError before anything is read
    with scorer_lock(store, wait_s=params.lock_wait_s, on_wait=on_wait), store.kept(), \
            stage_run(store, "bench.score", params) as record:
        if params.samples < 1:
            raise ConfigError("--samples must be at least 1")
        kinds = ("offline", "llm") if params.llm else ("offline",)
        judges = create_checks(params.judges, CheckOptions(store=store, samples=params.samples), kinds=kinds)
        llm_monitor = llm_monitor_for(store) if params.llm else None
        runs_dir = (params.runs_dir or store.path.resolve().parent / "runs").resolve()
        scored: list[str] = []
        outcomes: dict[str, int] = {}
        infra_errors: list[str] = []
        unavailable: list[str] = []
        failed: list[str] = []
        tasks: dict[str, TaskSpec] = {}
        repos: dict[str, RepoUsed | None] = {}
        memo: dict = {}  # identical trees of one task are re-run and judged once per batch
        work: list[tuple[str, TaskSpec, Path | None, str | None]] = []
        agents: dict[str, str] = {}
        # tasks and repositories resolved once per task
        for run_id, task_id, agent, sandbox, inputs in _pending(store, params):
            agents[run_id] = agent
            try:
                task = tasks.get(task_id) or tasks.setdefault(task_id, get_task(store, task_id))
                if task_id not in repos:  # resolved once per task, and only where a clean tree is made
                    repos[task_id] = _repository(store, task, params.repo) if needs_tree(task) else None
            except (InfrastructureError, InputError, LookupError) as exc:
                unavailable.append(f"{run_id}: {task_id}: {exc}")
                if on_done:
                    on_done(ScoredRun(run_id, task_id, agent, "unavailable", detail=str(exc)))
                continue
            repo = repos[task_id]
            if needs_tree(task) and repo is None:
                unavailable.append(f"{run_id}: {task_id}: {repository_unavailable(task)}")
                if on_done:
                    on_done(ScoredRun(run_id, task_id, agent, "unavailable", detail=repository_unavailable(task)))
                continue
            work.append((run_id, as_run(json.loads(inputs) if inputs else {}, task), repo.path if repo else None,
                         params.sandbox or sandbox))

        took: dict[str, float] = {}  # run id -> seconds its scoring took (each thread writes its own key)

        def judge(item: tuple[str, TaskSpec, Path | None, str | None]) -> Scored:
            run_id, task, repo_path, kind = item
            started = time.monotonic()
            try:
                return score_one(store, run_id, task, scratch=scratch_for(store, runs_dir, run_id), sandbox=kind,
                                 image=params.image, checks=judges, llm_monitor=llm_monitor, memo=memo,
                                 repo=repo_path)
            finally:
                took[run_id] = time.monotonic() - started

        if on_plan:  # those found unavailable already were handed to on_done: counted among the done
            on_plan(len(work) + len(unavailable))

        kinds_used = sorted({k for *_, k in work if k})
        for (run_id, task, _repo, _kind), done in in_threads(work, judge, params.workers, kinds_used):
            line = ScoredRun(run_id, task.id, agents[run_id], "scored", seconds=took.get(run_id, 0.0))
            if isinstance(done, InfrastructureError):
                infra_errors.append(f"{run_id}: {done.one_line()}")
                if on_done:
                    on_done(dataclasses.replace(line, status="infra_error", detail=done.one_line()))
                continue
            if isinstance(done, InputError):  # the task cannot be prepared from this repository: the task's problem
                unavailable.append(f"{run_id}: {task.id}: the task cannot be prepared: {done.one_line()}")
                if on_done:
                    on_done(dataclasses.replace(line, status="unavailable", detail=done.one_line()))
                continue
            if isinstance(done, BaseException):  # one run's failure is its recorded outcome; the batch goes on
                validation, crash_verdicts = _crashed(task, done)
                rows = write_scores(store, run_id, [Finding("scoring_crashed", "warn", _crash_reason(done))],
                                    validation, crash_verdicts)
                failed.append(f"{run_id}: {type(done).__name__}: {str(done)[:300]}")
                line = dataclasses.replace(line, status="failed", detail=f"{type(done).__name__}: {done}"[:300])
            else:
                validation = done.validation
                rows = write_scores(store, run_id, done.findings, validation, done.verdicts, done.evidence)
                line = dataclasses.replace(line, cheated=_cheated(done.verdicts))
            for table, n in rows.items():
                record.count(table, n)
            scored.append(run_id)
            key = validation.outcome if validation else "no_execution_phase"
            outcomes[key] = outcomes.get(key, 0) + 1
            if on_done:
                on_done(dataclasses.replace(line, outcome=key))
        order = {item[0]: i for i, item in enumerate(work)}
        scored.sort(key=order.__getitem__)
        record.note(scored=len(scored), outcomes=outcomes, infra_errors=len(infra_errors),
                    unavailable=len(unavailable), failed=len(failed), judges=[j.name for j in judges],
                    repositories={t: r.model_dump(mode="json") for t, r in repos.items() if r is not None})
    return ScoreResult(scored=len(scored), outcomes=outcomes, infra_errors=infra_errors, run_ids=scored,
                       stage_run_id=record.id, unavailable=unavailable, failed=failed)

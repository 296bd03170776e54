"""The scoring stage, `run(store, ScoreParams) -> ScoreResult` (behind `failatlas bench score`): monitor, execution
validator and the registered judges over stored runs; results into the scoring tables (`writes.py`).

Scoring reads only what the runner stored (task spec, outputs, trace), so it can run again at any time without
re-running agents; re-scoring a run replaces its rows in one transaction. The clean re-run and the hidden tests
start from the task's repository, resolved as `bench run` resolves it: the explicit `repo`, else the repository
cache's checkout, else the bundled folder. A run whose repository is unavailable is reported, not scored: it is
neither the agent's failure nor the harness's, and a later call scores it once the repository is there.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from failatlas.bench_core.runs.inputs import RepoUsed, repository_of
from failatlas.bench_core.runs.inputs import unavailable as repository_unavailable
from failatlas.bench_core.sandbox import sandbox_kind
from failatlas.bench_core.scoring.judges import (
    Judge,
    JudgeInput,
    JudgeOptions,
    Verdict,
    create_judges,
    resumable,
)
from failatlas.bench_core.scoring.monitor import monitor_findings
from failatlas.bench_core.scoring.validator import Validation, patched_workspace, settle, validate
from failatlas.bench_core.scoring.writes import write_scores
from failatlas.bench_core.tasks.catalog import get_task
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import ConfigError, InfrastructureError, InputError
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


class ScoreResult(BaseModel):
    """What one `run` scored: runs by validator outcome, runs left unscored by an infrastructure failure, and
    `unavailable`: "run: task: reason" for each run left unscored because its task's repository is not here or
    the task cannot be prepared from it (a masked file or function missing, a path leading out)."""

    scored: int
    outcomes: dict[str, int]
    infra_errors: list[str]
    run_ids: list[str]
    stage_run_id: str
    unavailable: list[str] = Field(default_factory=list)


def _verdicts(judges: list[Judge], inp: JudgeInput) -> list[Verdict]:
    # the declared kind is stored with each verdict: the metrics rank verdicts of one phase by it
    return [dataclasses.replace(v, kind=judge.kind) for judge in judges for v in judge(inp)]


def _sandbox_starter(backend: str, spec: dict, workspace: Path, run_id: str):
    """What a judge calls for a fresh sandbox of its own: the validator's kind and limits, started from the clean
    tree, with the given host folders mounted read-only."""
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

    def start(read_only_inputs: dict[str, str]):
        fields = {**spec, "run_id": f"{run_id}-judge", "labels": {"failatlas.purpose": "judge"},
                  "read_only_inputs": dict(read_only_inputs)}
        return create_sandbox(backend, SandboxSpec(**fields), workspace=workspace)

    return start


def needs_tree(task: TaskSpec) -> bool:
    """Whether scoring `task` prepares the clean tree (so needs its repository): a re-run or hidden tests."""
    return "execution" in task.judgeable_phases or bool(task.implementation.hidden_tests)


def _repository(store: Store, task: TaskSpec, repo: Path | None) -> RepoUsed | None:
    """The task's repository as `bench run` resolves it: `repo`, else the cache's checkout, else the bundled
    folder; None when there is none."""
    if repo is not None:
        return repository_of(task, repo=repo)
    from failatlas.bench_core.repos import repository_for

    return repository_of(task, cached=repository_for(store, task))


def _run_environment(store: Store, run_id: str) -> dict:
    """The clean re-run's network and environment: the policy, allowed hosts and CA bundle the run itself had
    (none for runs stored before runs recorded them), and a prebuilt environment's image. Scoring never opens the
    network wider than `registries`: the agent's code re-run (and imported by hidden tests) may install packages
    through the allowlisting proxy, but a run that had `full` does not get to fetch anything else while judged."""
    from failatlas.bench_core.sandbox.policy import upstream_proxy

    raw = store.query("SELECT inputs FROM runs WHERE id = ?", [run_id])
    inputs = json.loads(raw[0][0]) if raw and raw[0][0] else {}
    network = inputs.get("network") or "none"
    fields: dict = {"network": "registries" if network == "full" else network,
                    "allow_hosts": inputs.get("allow_hosts") or []}
    if inputs.get("environment") == "prebuilt" and inputs.get("image"):
        fields["image"] = inputs["image"]
    if fields["network"] != "none":
        fields["upstream_proxy"] = upstream_proxy()
        if inputs.get("ca_bundle") and Path(inputs["ca_bundle"]["path"]).is_file():
            fields["ca_bundle"] = inputs["ca_bundle"]["path"]
    return fields


def _score_one(store: Store, run_id: str, task: TaskSpec, *, scratch: Path, params: ScoreParams,
               judges: list[Judge], llm_monitor, repo: Path | None = None
               ) -> tuple[Validation | None, dict[str, int]]:
    """Score one stored run: monitor (rules, plus the LLM check), the clean tree (the masked repository of `repo`,
    else the bundled one, with the agent's diff) for the validator's re-run and the judges that need a sandbox
    (each starts its own), then the other judges, the validation settled by the execution judge; store it all in
    one transaction. Raises InfrastructureError when the clean re-run cannot happen."""
    outputs = json.loads(store.query("SELECT outputs FROM runs WHERE id = ?", [run_id])[0][0])
    findings, monitor_verdict = monitor_findings(store, run_id, task, llm_check=llm_monitor)
    verdicts: list[Verdict] = [monitor_verdict] if monitor_verdict is not None else []
    inp = JudgeInput(task=task, outputs=outputs, run_id=run_id)
    validation = None
    if needs_tree(task):
        spec = {"run_id": f"{run_id}-validate", "labels": {"failatlas.purpose": "validator"},
                "memory_mb": max(2048, int(task.resources.memory_gb * 1024)), **_run_environment(store, run_id)}
        if params.image or task.resources.image:
            spec["image"] = params.image or task.resources.image
        lease = None
        try:
            if task.resources.gpus > 0:  # the clean re-run gets its own GPUs, by device id, like the agent did
                from failatlas.bench_core.sandbox import GpuAllocator

                lease = GpuAllocator().lease(task.resources.gpus, owner=f"{run_id}-validate", wait_s=3600)
                spec["gpu_ids"] = list(lease.ids)
            workspace, patch_error = patched_workspace(task, outputs.get("diff") or "", scratch=scratch,
                                                       repo=repo)
            if "execution" in task.judgeable_phases:
                validation = validate(task, outputs, workspace=workspace, patch_error=patch_error,
                                      sandbox_backend=params.sandbox, spec_fields=spec)
            inp = dataclasses.replace(inp, validated=True, validation=validation)
            if patch_error is None:
                inp = dataclasses.replace(inp, workspace=workspace,
                                          start_sandbox=_sandbox_starter(params.sandbox, spec, workspace, run_id))
            verdicts += _verdicts([j for j in judges if j.needs_sandbox], inp)
        finally:
            if lease is not None:
                lease.release()
            shutil.rmtree(scratch, ignore_errors=True)
    inp = dataclasses.replace(inp, workspace=None, start_sandbox=None)
    verdicts += _verdicts([j for j in judges if not j.needs_sandbox], inp)
    validation = settle(validation, verdicts)
    return validation, write_scores(store, run_id, findings, validation, verdicts)


def _pending(store: Store, params: ScoreParams) -> list[tuple[str, str]]:
    where = "WHERE r.status != 'infra_error'"
    if not params.rescore:
        # unscored, with a failed judgement (its endpoint failed, its reply never parsed), or with LLM judgements
        # not run for want of an endpoint configured now: a plain re-run of scoring resumes those (one rule for
        # every judge and the monitor: judges.resumable)
        where += " AND ((NOT EXISTS (SELECT 1 FROM judgements j WHERE j.run_id = r.id)" \
                 " AND NOT EXISTS (SELECT 1 FROM validations v WHERE v.run_id = r.id))" \
                 f" OR EXISTS (SELECT 1 FROM judgements j WHERE j.run_id = r.id AND {resumable('j')}))"
    rows = store.query(f"SELECT r.id, r.task_id FROM runs r {where} ORDER BY r.id")
    if params.run_ids is not None:
        wanted = set(params.run_ids)
        rows = [r for r in rows if r[0] in wanted]
    return rows


def run(store: Store, params: ScoreParams, *, on_done: Callable[[str], None] | None = None) -> ScoreResult:
    """Score stored runs (by default those not scored yet, and those a judge's endpoint stopped). A run whose
    clean re-run fails for infrastructure reasons is reported in `infra_errors`, one whose task's repository is
    unavailable or cannot be prepared in `unavailable`; neither is scored, and the batch goes on. Records one
    `stage_runs` row (stage `bench.score`), with the repository (source, URL, commit) each task was scored from.
    Raises ConfigError for an unknown judge or bad parameters."""
    from failatlas.bench_core.scoring.llm_judges import llm_monitor_for

    if params.sandbox is not None:
        sandbox_kind(params.sandbox)  # an unknown kind is a ConfigError before anything is read
    with stage_run(store, "bench.score", params) as record:
        if params.samples < 1:
            raise ConfigError("--samples must be at least 1")
        kinds = ("offline", "llm") if params.llm else ("offline",)
        judges = create_judges(params.judges, JudgeOptions(store=store, samples=params.samples), kinds=kinds)
        llm_monitor = llm_monitor_for(store) if params.llm else None
        runs_dir = (params.runs_dir or store.path.resolve().parent / "runs").resolve()
        scored: list[str] = []
        outcomes: dict[str, int] = {}
        infra_errors: list[str] = []
        unavailable: list[str] = []
        tasks: dict[str, TaskSpec] = {}
        repos: dict[str, RepoUsed | None] = {}
        for run_id, task_id in _pending(store, params):
            task = tasks.get(task_id) or tasks.setdefault(task_id, get_task(store, task_id))
            if task_id not in repos:  # resolved once per task, and only where a clean tree is made
                repos[task_id] = _repository(store, task, params.repo) if needs_tree(task) else None
            repo = repos[task_id]
            if needs_tree(task) and repo is None:
                unavailable.append(f"{run_id}: {task_id}: {repository_unavailable(task)}")
                continue
            try:
                kind = params.sandbox or store.query("SELECT sandbox FROM runs WHERE id = ?", [run_id])[0][0]
                validation, rows = _score_one(store, run_id, task, scratch=runs_dir / run_id / "validate",
                                              params=params.model_copy(update={"sandbox": kind}), judges=judges,
                                              llm_monitor=llm_monitor,
                                              repo=repo.path if repo else None)
            except InfrastructureError as exc:
                infra_errors.append(f"{run_id}: {exc.one_line()}")
                continue
            except InputError as exc:  # the task cannot be prepared from this repository: the task's problem
                unavailable.append(f"{run_id}: {task_id}: the task cannot be prepared: {exc.one_line()}")
                continue
            for table, n in rows.items():
                record.count(table, n)
            scored.append(run_id)
            key = validation.outcome if validation else "no_execution_phase"
            outcomes[key] = outcomes.get(key, 0) + 1
            if on_done:
                on_done(run_id)
        record.note(scored=len(scored), outcomes=outcomes, infra_errors=len(infra_errors),
                    unavailable=len(unavailable), judges=[j.name for j in judges],
                    repositories={t: r.model_dump(mode="json") for t, r in repos.items() if r is not None})
    return ScoreResult(scored=len(scored), outcomes=outcomes, infra_errors=infra_errors, run_ids=scored,
                       stage_run_id=record.id, unavailable=unavailable)

"""Typed values of task validation: what to validate (`ValidateParams`), a task's verdict, what a call did."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from failatlas.bench_core.runs import BenchParams, ResourceOverrides

# status -> what it means (docs/benchmarks.md repeats this table; `failatlas tasks validate --help` prints it)
STATUSES: dict[str, str] = {
    "valid": "gold passes every phase that can be checked, at least one of them by running code (the hidden "
             "tests, or the clean re-run compared with what the task expects), and null fails it",
    "judges-only": "gold passes every phase that can be checked and null fails one, but no check ran code: "
                   "only judges compared gold's text (design, conclusion, diff) with the text it was made from "
                   "(the reason says why: no reference command, no hidden tests, nothing to compare)",
    "needs-gpu": "the task needs more GPUs than this host has (declared, or the gold run failed for want of CUDA)",
    "repo-unavailable": "no repository for the task: not bundled, not in the repository cache, no --repo",
    "prepare-fails": "the masked workspace cannot be built from the repository (a masked file or function is "
                     "missing, a stub does not compile, ground truth leaks)",
    "data-unavailable": "the gold run's re-run needed a dataset, weights or a download it could not reach",
    "env-failed": "the gold run's re-run failed setting up its environment (a package is missing)",
    "gold-fails": "the reference solution fails a check that does not point at the environment (the reason says "
                  "which)",
    "null-passes": "an agent that does nothing passes every checked phase: the task is broken or trivially gamed",
    "not-checkable": "no phase of the task could be checked for gold: gold ran and nothing could be compared, or "
                     "there is no reference for gold to restore (an extension task on the user's base repository)",
    "infra-error": "the harness failed (sandbox, image), in a run or in scoring it: the task was not judged",
}
VALID = "valid"


class ValidateParams(BaseModel):
    """What `failatlas tasks validate` does. Recorded with the stage run."""

    model_config = ConfigDict(extra="forbid")

    task_ids: list[str] | None = None
    benchmark: str | None = None
    kind: str | None = None
    papers: list[str] | None = None
    masked: int | None = Field(default=None, ge=0, description="the number of masked functions (AutoExperiment's n)")
    setting: str | None = None
    sandbox: str = "docker"
    image: str | None = None
    repo: Path | None = None
    runs_dir: Path | None = None
    workers: int = Field(default=1, ge=1)
    llm: bool = Field(default=False, description="also let the LLM judges score (needs an endpoint)")
    retry_infra: bool = Field(default=True, description="redo stored gold and null runs that ended in infra_error")
    mutants: int = Field(default=20, ge=0, description="mutants of the reference per valid task (0: no mutation score)")
    mutation_seed: int = 0
    method_mutants: int = Field(default=20, ge=0, description="method mutants per valid task, declared ones first "
                                "(0: no method mutation score; method_mutation.py)")
    # as on `bench run` (BenchParams): resource overrides, the network, data inputs and the copy-out cap, for the
    # gold, null and mutant runs, their re-runs and the derived tests' recording
    resources: ResourceOverrides = Field(default_factory=ResourceOverrides)
    network: str | None = None
    allow_hosts: list[str] = Field(default_factory=list)
    data: dict[str, Path] = Field(default_factory=dict)
    max_copy_mib: int | None = Field(default=None, ge=1)
    reference: Path | None = Field(default=None, description="the reference version of extension tasks' "
                                   "repository: a tree or a patch (reference.py)")
    reference_command: str | None = Field(default=None, description="the reference's command, for tasks whose "
                                          "benchmark gives none (reference.py)")
    expected_from_reference: bool = Field(default=False, description="validate each task's variant whose expected "
                                          "values are the reference's own run on the given data (standin.py)")

    def bench_params(self, agent: str, task_ids: list[str], agent_params: dict | None = None) -> BenchParams:
        """The `bench run` parameters of this validation's runs of `agent` on `task_ids`."""
        return BenchParams(
            agent=agent, agent_params=agent_params or {}, task_ids=task_ids, gpu_tasks=True,
            retry_infra=self.retry_infra, workers=self.workers, sandbox=self.sandbox, image=self.image,
            repo=self.repo, runs_dir=self.runs_dir, resources=self.resources, network=self.network,
            allow_hosts=self.allow_hosts, data=self.data, max_copy_mib=self.max_copy_mib,
            **({"setting": self.setting} if self.setting else {}))


class MutationScore(BaseModel):
    """A task's mutation score (`mutation.py`): mutants tried, killed by a check that runs code, survived, not
    scored (in neither count), killed / (killed + survived) (None with nothing scored), each survivor as
    `name: what`, and the seed they were chosen with."""

    mutants: int
    killed: int
    survived: int
    not_scored: int
    score: float | None
    survivors: list[str]
    seed: int
    # survivors whose clean re-run reported exactly gold's values and that no test told apart from the reference:
    # equivalent on everything the task runs, so in neither count (`mutation.py`)
    equivalent: int = 0
    equivalents: list[str] = Field(default_factory=list)


class MethodMutantResult(BaseModel):
    """What the checks did with one method mutant (`method_mutation.py`): its fate, I (the hidden and derived
    tests: `passed`, `failed`, None where none ran), E's outcome, whether its values lie inside their tolerances,
    and each metric's gap to gold's re-run."""

    name: str
    what: str
    declared: bool
    fate: str
    i: str | None = None
    e: str | None = None
    # every expected value of its re-run inside its tolerance (None: no values): E's values, before scoring's
    # consistency rule calls a passing E beside failing tests `fabricated_result`
    within_tolerance: bool | None = None
    gaps: dict[str, float | None] = Field(default_factory=dict)


class MethodMutationScore(BaseModel):
    """A task's method mutation score (`method_mutation.py`): method mutants tried (`declared` of them from the
    task file), killed by I or E, survived both, not scored, equivalent (generic ones whose re-run gave gold's
    values exactly and no test rejected), killed / (killed + survived), each mutant's result, and the warnings of
    tolerances that admit a mutant."""

    mutants: int
    declared: int
    killed: int
    survived: int
    not_scored: int
    equivalent: int
    score: float | None
    survivors: list[str]
    equivalents: list[str] = Field(default_factory=list)
    results: list[MethodMutantResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class TaskVerdict(BaseModel):
    """One task's status, with the one-line reason and the runs it was decided on."""

    task_id: str
    benchmark: str
    status: str
    reason: str
    gold_run_id: str | None = None
    null_run_id: str | None = None
    setting: str | None = None
    mutation: MutationScore | None = None
    method_mutation: MethodMutationScore | None = None
    # issue 52: the command to run next (R2; empty for valid), gold's and null's phases (1, 0 or None each:
    # {"gold": {"D": 1, ...}, "null": {...}}) and the seconds their runs and clean re-runs took
    next_step: str = ""
    phases: dict[str, dict[str, int | None]] = Field(default_factory=dict)
    seconds: float | None = None
    paper_id: str | None = None


class ValidateResult(BaseModel):
    """Every verdict of one call, and the id of its `stage_runs` row."""

    verdicts: list[TaskVerdict]
    stage_run_id: str

    def counts(self) -> dict[str, dict[str, int]]:
        """benchmark -> status -> number of tasks."""
        out: dict[str, Counter] = {}
        for v in self.verdicts:
            out.setdefault(v.benchmark, Counter())[v.status] += 1
        return {b: dict(c) for b, c in sorted(out.items())}

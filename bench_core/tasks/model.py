"""One typed task model for EXP-Bench, AutoExperiment, RExBench and FailAtlas's own suites.

A `TaskSpec` holds everything about a task, ground truth included. What an agent may see is only
`TaskSpec.agent_view()`; the rest never enters a sandbox.
"""

from __future__ import annotations

import hashlib
import math
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from failatlas.core.paths import relative_path

TASK_SPEC_VERSION = 1



def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value} (an infinite value would let any number pass, NaN "
                         "none)")
    return value


def _tolerance(value: float) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"tolerances must be finite and >= 0, not {value}")
    return value


# Expected values and tolerances are finite: `value: .inf` (or a tolerance of .inf) would let any number pass and
# NaN would let none, so a task file holding one is refused when it is read, naming the field.
Finite = Annotated[float, AfterValidator(_finite)]
Tolerance = Annotated[float, AfterValidator(_tolerance)]


def _in_repository(path: str | None) -> str | None:
    """A path inside the repository, as given: relative, without '..'. ValueError (an InputError) otherwise, so
    no spec, however built or read back from a store, names a host path to delete, write or copy."""
    if path is not None:
        relative_path(path)
    return path


class Benchmark(StrEnum):
    EXPBENCH = "expbench"
    AUTOEXPERIMENT = "autoexperiment"
    REXBENCH = "rexbench"
    MINI = "failatlas-mini"


class TaskKind(StrEnum):
    """What the agent must produce and what can be judged."""

    T1 = "T1"  # EXP-Bench: paper-derived, implementing files known and removed
    T2 = "T2"  # EXP-Bench: repo-derived ("How can you ..."), source files removed
    T3 = "T3"  # EXP-Bench: no implementation found; design and conclusion only
    MASKED_FUNCTIONS = "masked_functions"  # AutoExperiment: n functions stubbed
    EXTENSION = "extension"  # RExBench: implement an extension of a base repository
    FULL_CODE = "full_code"  # AutoExperiment n = 0: nothing masked, run the experiments and report
    DESIGN_ONLY = "design_only"  # design and conclusion only, nothing to run


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class PaperMeta(_Model):
    id: str | None = None
    title: str | None = None
    venue: str | None = None
    year: int | None = None
    url: str | None = None
    arxiv_id: str | None = None


class RepoRef(_Model):
    """Where the task's code comes from: a remote repository at a pinned commit, or a bundled folder."""

    url: str | None = None
    commit: str | None = None
    local_path: str | None = Field(default=None, description="bundled repository, relative to the task file")


class DesignSpec(_Model):
    """Ground-truth experiment design (EXP-Bench's `design_complexity`)."""

    constant: dict[str, Any] = Field(default_factory=dict)
    independent: dict[str, Any] = Field(default_factory=dict)
    dependent: dict[str, Any] = Field(default_factory=dict)

    def variable_names(self) -> list[tuple[str, str]]:
        """(role, name) for every ground-truth variable."""
        return [(role, name) for role in ("constant", "independent", "dependent")
                for name in getattr(self, role)]


class FunctionRef(_Model):
    """A function or method to mask: `qualname` is `name` or `Class.name`. With `line_start` (1-based, the
    `def` line or its first decorator, as AutoExperiment gives it) the definition is located by its lines and
    `qualname` may be the bare name (`__init__`); `docstring` replaces the stub's docstring (AutoExperiment's
    generated description, which *is* the task)."""

    path: str
    qualname: str
    line_start: int | None = Field(default=None, ge=1)
    line_end: int | None = Field(default=None, ge=1)
    docstring: str | None = None

    @field_validator("path")
    @classmethod
    def _relative(cls, path: str) -> str:
        return _in_repository(path)


class Masking(_Model):
    """What is removed from the repository before an agent sees it (paths relative to the repo root)."""

    files: list[str] = Field(default_factory=list)
    functions: list[FunctionRef] = Field(default_factory=list)
    remove_also: list[str] = Field(default_factory=list, description="e.g. the README, paper files")
    maskable_functions: list[FunctionRef] = Field(
        default_factory=list, description="AutoExperiment: the functions from which n-combinations are drawn"
    )
    outside: list[str] = Field(
        default_factory=list, description="files to hide that the task names by a path outside the repository "
        "(EXP-Bench's `/tmp/repos/...`): they cannot be found to be removed, so the task cannot be prepared")
    overlay: str | None = Field(
        default=None,
        description="folder (relative to the task file) whose files replace reference files in the agent's "
        "tree: the base version of an extension task",
    )

    @field_validator("files", "remove_also")
    @classmethod
    def _relative(cls, paths: list[str]) -> list[str]:
        for path in paths:
            _in_repository(path)
        return paths


class ImplementationTruth(_Model):
    """Implementation ground truth: requirement steps and reference files (relative to the repo root)."""

    requirements: list[str] = Field(default_factory=list)
    reference_files: list[str] = Field(default_factory=list)
    method_notes: str | None = None
    hidden_tests: list[str] = Field(
        default_factory=list, description="test files kept with the reference tree, never shown to the agent"
    )


class RunSpec(_Model):
    """How the experiment is run: the exact command, from the repo root, and where its results appear.

    `answer`: where the validator reads the observed results: `results_file` (the JSON file below; the default
    when one is named) or `stdout_json` (the last JSON object the command prints, AutoExperiment's "final answer as
    a json"). `agent_script`: the agent's own run script is the command (EXP-Bench's reproduce script), re-run by
    the validator when the task has no command of its own."""

    command: str | None = None
    results_file: str | None = Field(default=None, description="JSON file of metric -> value the command writes")
    timeout_s: int = 3600
    answer: Literal["results_file", "stdout_json"] | None = None
    agent_script: bool = False

    @field_validator("results_file")
    @classmethod
    def _relative(cls, path: str | None) -> str | None:
        return _in_repository(path)


class ExpectedMetric(_Model):
    """One expected numeric result; passes when numpy.isclose(observed, value, rtol, atol)."""

    name: str
    value: Finite
    rtol: Tolerance = 0.0
    atol: Tolerance = 0.0
    experiment: str | None = None


class SuccessCriterion(_Model):
    """How an extension task's output decides success (RExBench)."""

    kind: Literal["exact", "tolerance", "oracle_band"]
    metric: str
    value: Finite | str | None = None
    rtol: Tolerance = 0.0
    atol: Tolerance = 0.0
    oracle_values: list[Finite] = Field(default_factory=list)
    band: Tolerance = Field(default=0.0, description="oracle_band: allowed margin beyond [min, max] of oracle runs")

    @model_validator(mode="after")
    def _complete(self) -> SuccessCriterion:
        if self.kind in ("exact", "tolerance") and self.value is None:
            raise ValueError(f"a '{self.kind}' criterion needs a value")
        if self.kind == "oracle_band" and not self.oracle_values:
            raise ValueError("an 'oracle_band' criterion needs oracle_values")
        return self


class OutputCheck(_Model):
    """A user-supplied execution check (RExBench publishes no expected values): where the observed value comes
    from and what it must be. `stdout_regex`: the last match of `pattern` (its first group, else the whole match)
    in the re-run's stdout; `csv_column`: `column` of the CSV `file` (relative to the repository root) at `row`
    (an index, or `last`/`first`/`max`/`min`); `json_field`: the dotted `field` (`a.b[0]`) of the JSON `file`.
    Numbers compare with numpy.isclose(observed, value, rtol, atol); strings exactly."""

    name: str
    source: Literal["stdout_regex", "csv_column", "json_field"]
    value: Finite | str
    pattern: str | None = None
    file: str | None = None
    column: str | None = None
    row: int | Literal["last", "first", "max", "min"] = "last"
    field: str | None = None
    rtol: Tolerance = 0.0
    atol: Tolerance = 0.0

    @field_validator("file")
    @classmethod
    def _relative(cls, path: str | None) -> str | None:
        return _in_repository(path)

    @model_validator(mode="after")
    def _complete(self) -> OutputCheck:
        needs = {"stdout_regex": ("pattern",), "csv_column": ("file", "column"), "json_field": ("file", "field")}
        missing = [k for k in needs[self.source] if not getattr(self, k)]
        if missing:
            raise ValueError(f"a '{self.source}' check needs {', '.join(missing)}")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern is not a regular expression: {exc}") from exc
        return self


class MethodReplacement(_Model):
    """One function a method mutant replaces: `qualname` in the repository file `path`, by the one definition that
    `source` holds (a Python file relative to the task file's folder; `tasks/method_mutants.py` checks it)."""

    path: str
    qualname: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
    source: str = Field(min_length=1)

    @field_validator("path")
    @classmethod
    def _relative(cls, path: str) -> str:
        return _in_repository(path)


class MethodMutantSpec(_Model):
    """A plausible other way to fill the task's masked code, which its checks must reject (issue 50): threshold
    moving for a reweighting task, no autocast for a precision task. `tasks validate` counts it in the task's
    method mutation score."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")
    what: str = Field(min_length=1, max_length=300)
    replace: list[MethodReplacement] = Field(min_length=1)


class Setting(_Model):
    """One way of giving the task to an agent (AutoExperiment's "Partial Code" vs "Partial Code + refsol"):
    chosen per run and part of the run's key."""

    name: str
    show_run_command: bool = True
    description: str | None = None


EnvMode = Literal["agent", "prebuilt"]


class Resources(_Model):
    """What a task's sandbox needs. `network`: none | registries (package indexes only) | full (`true` is full,
    `false` none); `allow_hosts`: more hosts `registries` allows. `environment`: `agent` (the agent sets up the
    repository's dependencies itself, as in EXP-Bench) or `prebuilt` (the run starts from the image that
    `failatlas sandbox build-env` built from the repository's spec)."""

    gpus: int = 0
    time_limit_s: int = 3600
    memory_gb: float = 4.0
    cpus: float = 1.0
    image: str | None = None
    network: Literal["none", "registries", "full"] = "none"
    allow_hosts: list[str] = Field(default_factory=list)
    environment: EnvMode = "agent"
    env_spec: str | None = Field(default=None, description="the repository's environment file (requirements.txt, "
                                 "environment.yml, pyproject.toml, Dockerfile); default: the first found")

    @field_validator("network", mode="before")
    @classmethod
    def _policy(cls, v: Any) -> str:
        if v is None or isinstance(v, bool):
            return "full" if v else "none"
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("env_spec")
    @classmethod
    def _relative(cls, path: str | None) -> str | None:
        return _in_repository(path)

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        from failatlas.bench_core.tasks.hosts import check_host
        from failatlas.core.errors import ConfigError

        out = []
        for host in hosts:
            try:  # task content is untrusted: no IP literals, no *.tld, nothing local (tasks.hosts.check_host)
                out.append(check_host(host, task=True, field="resources.allow_hosts:"))
            except ConfigError as exc:
                raise ValueError(str(exc).split("\n")[0]) from None
        return out


class AgentView(_Model):
    """Exactly what an agent is told about a task. No ground truth."""

    task_id: str
    question: str
    method: str | None
    instructions: str | None
    hints: list[str]
    run_command: str | None
    results_file: str | None
    expected_metrics: list[str]
    needs_implementation: bool
    gpus: int
    materials: list[str] = Field(default_factory=list, description="files given with the task (paper.txt)")
    setting: str | None = None
    rerun_script: bool = Field(default=False, description="the agent's run script is re-run and its output checked")
    masked_definitions: bool = Field(default=False, description="the task masks functions: only their bodies (and "
                                     "what they use of their own file) are judged")


class TaskSpec(_Model):
    """A benchmark task, ground truth included."""

    spec_version: int = TASK_SPEC_VERSION
    id: str
    benchmark: str
    kind: TaskKind
    title: str | None = None
    paper: PaperMeta = Field(default_factory=PaperMeta)
    repository: RepoRef = Field(default_factory=RepoRef)
    question: str
    method: str | None = None
    instructions: str | None = None
    hints: list[str] = Field(default_factory=list, description="hint levels, least to most revealing")
    design: DesignSpec | None = None
    expected_conclusion: str | None = None
    implementation: ImplementationTruth = Field(default_factory=ImplementationTruth)
    masking: Masking = Field(default_factory=Masking)
    run: RunSpec = Field(default_factory=RunSpec)
    expected_results: list[ExpectedMetric] = Field(default_factory=list)
    success: SuccessCriterion | None = None
    checks: list[OutputCheck] = Field(default_factory=list, description="user-supplied execution checks")
    materials: dict[str, str] = Field(
        default_factory=dict,
        description="workspace path -> file relative to the task file's folder, copied into the agent's "
        "workspace (AutoExperiment's paper.txt)",
    )
    method_mutants: list[MethodMutantSpec] = Field(
        default_factory=list, description="other methods the checks must reject (task_validation/mutation.py)")
    settings: list[Setting] = Field(default_factory=list, description="the first is the default")
    resources: Resources = Field(default_factory=Resources)
    data: dict[str, str | None] = Field(
        default_factory=dict,
        description="data input name -> a folder or file relative to the task file's folder, or null: the user "
        "gives it (`--data NAME=PATH`); mounted read-only at /data/NAME (tasks/data.py)",
    )
    source: str | None = Field(default=None, description="file the task was imported from")
    warnings: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict, description="source fields kept as they came")

    @field_validator("id")
    @classmethod
    def _id_shape(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/,+-]*", v):
            raise ValueError(f"task id {v!r} may hold only letters, digits and . _ : / , + -")
        if any(part in ("", ".", "..") for part in v.split("/")):
            raise ValueError(f"task id {v!r} may not read as a path: no '.' or '..' between slashes, no empty part")
        return v

    @field_validator("method_mutants")
    @classmethod
    def _unique_mutants(cls, mutants: list[MethodMutantSpec]) -> list[MethodMutantSpec]:
        names = [m.name for m in mutants]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"method mutant names must be unique; repeated: {', '.join(repeated)}")
        return mutants

    @field_validator("materials")
    @classmethod
    def _materials(cls, materials: dict[str, str]) -> dict[str, str]:
        for dest, src in materials.items():
            _in_repository(dest)
            _in_repository(src)
        return materials

    @field_validator("data")
    @classmethod
    def _data(cls, data: dict[str, str | None]) -> dict[str, str | None]:
        from failatlas.bench_core.tasks.data import check_name
        from failatlas.core.errors import ConfigError

        for name, path in data.items():
            try:  # task content is untrusted: a name, and a path inside the task's folder, never a host path
                check_name(name, field="data:")
            except ConfigError as exc:
                raise ValueError(str(exc).split("\n")[0]) from None
            _in_repository(path)
        return data

    @property
    def judgeable_phases(self) -> list[str]:
        """Phases that can be scored for this task."""
        phases = []
        if self.design is not None:
            phases.append("design")
        if self.kind not in (TaskKind.T3, TaskKind.DESIGN_ONLY, TaskKind.FULL_CODE):
            phases.append("implementation")
        runnable = bool(self.run.command) or self.run.agent_script
        checkable = bool(self.expected_results or self.success or self.checks) or (
            self.run.agent_script and bool(self.expected_conclusion))
        if runnable and checkable:
            phases.append("execution")
        if self.expected_conclusion:
            phases.append("conclusion")
        return phases

    def setting(self, name: str | None = None) -> Setting:
        """The named setting (ValueError naming the known ones), else the default: the first, or one that shows
        everything when the task declares none."""
        if name is None:
            return self.settings[0] if self.settings else Setting(name="default")
        for setting in self.settings:
            if setting.name == name:
                return setting
        known = ", ".join(s.name for s in self.settings) or "none (the task has one way only)"
        raise ValueError(f"task {self.id} has no setting {name!r}; its settings: {known}")

    def agent_view(self, setting: str | None = None) -> AgentView:
        """What the agent is allowed to know, in `setting` (the default when None)."""
        chosen = self.setting(setting)
        return AgentView(
            task_id=self.id,
            question=self.question,
            method=self.method,
            instructions=self.instructions,
            hints=list(self.hints),
            run_command=self.run.command if chosen.show_run_command else None,
            results_file=self.run.results_file,
            expected_metrics=[m.name for m in self.expected_results]
            + ([self.success.metric] if self.success else [])
            + [c.name for c in self.checks],
            needs_implementation=self.kind not in (TaskKind.T3, TaskKind.DESIGN_ONLY, TaskKind.FULL_CODE),
            gpus=self.resources.gpus,
            materials=sorted(self.materials),
            setting=chosen.name if self.settings else None,
            rerun_script=self.run.agent_script,
            masked_definitions=bool(self.masking.functions),
        )


def stable_id(*parts: str, prefix: str, length: int = 10) -> str:
    """A task id derived from content, not list order: `prefix` plus a short hash of `parts`."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:length]
    return f"{prefix}-{digest}"

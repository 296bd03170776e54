"""The scoring stage, `run(store, ScoreParams) -> ScoreResult` (behind `failatlas bench score`): monitor, execution
validator and the registered judges over stored runs; results into the scoring tables (`writes.py`).

Scoring reads only what the runner stored (task spec, outputs, trace), so it can run again at any time without
re-running agents; re-scoring a run replaces its rows in one transaction. The clean re-run and the hidden tests
start from the task's repository, resolved as `bench run` resolves it: the explicit `repo`, else the repository
cache's checkout, else the bundled folder. A run whose repository is unavailable is reported, not scored: it is
neither the agent's failure nor the harness's, and a later call scores it once the repository is there.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import fcntl
import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from failatlas.bench_core.hidden.observe import Watch
from failatlas.bench_core.runs.inputs import RepoUsed, ResourceOverrides, repository_of
from failatlas.bench_core.runs.inputs import unavailable as repository_unavailable
from failatlas.bench_core.runs.threads import in_threads
from failatlas.bench_core.sandbox import sandbox_kind
from failatlas.bench_core.sandbox.venvs import RECORD
from failatlas.bench_core.scoring.constructed import Constructed, attribution, construct
from failatlas.bench_core.scoring.counterfactual import Restored, restore, tree_digest
from failatlas.bench_core.scoring.judges import (
    Judge,
    JudgeInput,
    JudgeOptions,
    Verdict,
    create_judges,
    resumable,
)
from failatlas.bench_core.scoring.literals import (
    MAX_FILE_BYTES,
    literal_findings,
    literal_matches,
    reference_values,
)
from failatlas.bench_core.scoring.monitor import Finding, monitor_findings
from failatlas.bench_core.scoring.rebinding import attribute
from failatlas.bench_core.scoring.reference_answer import Reader, derive_from_reference, needs_reader
from failatlas.bench_core.scoring.transplant import transplant
from failatlas.bench_core.scoring.validator import Validation, clean_trees, settle, validate
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


def _verdicts(judges: list[Judge], inp: JudgeInput) -> list[Verdict]:
    # the declared kind is stored with each verdict: the metrics rank verdicts of one phase by it
    return [dataclasses.replace(v, kind=judge.kind) for judge in judges for v in judge(inp)]


def _sandbox_starter(backend: str, spec: dict, workspace: Path, run_id: str, memo: dict | None = None):
    """What a judge calls for a fresh sandbox of its own: the validator's kind and limits, started from the clean
    tree, with the given host folders mounted read-only. It carries its `tree` and the batch's `memo`."""
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

    def start(read_only_inputs: dict[str, str]):
        fields = {**spec, "run_id": f"{run_id}-judge", "labels": {"failatlas.purpose": "judge"},
                  "read_only_inputs": dict(read_only_inputs)}
        return create_sandbox(backend, SandboxSpec(**fields), workspace=workspace)

    start.tree, start.memo = workspace, memo  # type: ignore[attr-defined]
    return start


def _validate(task: TaskSpec, outputs: dict, tree: Path, patch_error: str | None, params: ScoreParams, spec: dict,
              memo: dict | None, reader: Reader | None = None, watch: Watch | None = None) -> Validation:
    """`validate`, reusing within one scoring batch the result of an identical re-run (same task, tree, run
    script, changed files, sandbox settings and observation)."""
    key = None
    if memo is not None and patch_error is None:
        digest = tree_digest(tree)
        if digest is not None:
            settings = {k: v for k, v in spec.items() if k not in ("run_id", "labels")}
            key = ("validate", task.id, digest, params.sandbox, reader is not None, watch is not None, json.dumps(
                [outputs.get("run_script"), sorted(map(str, outputs.get("changed_files") or [])), settings],
                sort_keys=True, default=str))
            if key in memo:
                return copy.deepcopy(memo[key])
    validation = validate(task, outputs, workspace=tree, patch_error=patch_error, sandbox_backend=params.sandbox,
                          spec_fields=spec, reader=reader, watch=watch)
    if key is not None and validation.outcome not in ("timeout", "oom"):
        memo[key] = copy.deepcopy(validation)
    return validation


def needs_tree(task: TaskSpec) -> bool:
    """Whether scoring `task` prepares the clean tree (so needs its repository): a re-run, hidden tests, or tests
    derived from the reference (masked functions and a command to record their calls from)."""
    derived = "implementation" in task.judgeable_phases and bool(task.masking.functions) and bool(task.run.command)
    return "execution" in task.judgeable_phases or bool(task.implementation.hidden_tests) or derived


def _repository(store: Store, task: TaskSpec, repo: Path | None) -> RepoUsed | None:
    """The task's repository as `bench run` resolves it: `repo`, else the cache's checkout, else the bundled
    folder; None when there is none."""
    if repo is not None:
        return repository_of(task, repo=repo)
    from failatlas.bench_core.repos import repository_for

    return repository_of(task, cached=repository_for(store, task))


def _run_environment(store: Store, run_id: str) -> dict:
    """The clean re-run's network and environment: the policy, allowed hosts and CA bundle the run itself had
    (none for runs stored before runs recorded them), and the image its root was (a prebuilt environment's, or the
    one a run recorded as its root: a bwrap run on the host's folders is re-run there too). Scoring never opens the
    network wider than `registries`: the agent's code re-run (and imported by hidden tests) may install packages
    through the allowlisting proxy, but a run that had `full` does not get to fetch anything else while judged."""
    from failatlas.bench_core.sandbox.policy import upstream_proxy

    raw = store.query("SELECT inputs FROM runs WHERE id = ?", [run_id])
    inputs = json.loads(raw[0][0]) if raw and raw[0][0] else {}
    network = inputs.get("network") or "none"
    fields: dict = {"network": "registries" if network == "full" else network,
                    "allow_hosts": inputs.get("allow_hosts") or []}
    if inputs.get("environment") == "prebuilt" and inputs.get("env_dir"):
        if not Path(inputs["env_dir"], RECORD).is_file():
            raise InfrastructureError(f"the run's task environment {inputs['env_dir']} is gone",
                                      hint="build it again with `failatlas sandbox build-env --venv`")
        fields["env_dir"] = inputs["env_dir"]
    elif inputs.get("image") and (inputs.get("environment") == "prebuilt"
                                  or (inputs.get("root") or "").startswith("image ")):  # the root the run had
        fields["image"] = inputs["image"]
    if fields["network"] != "none":
        fields["upstream_proxy"] = upstream_proxy()
        if inputs.get("ca_bundle") and Path(inputs["ca_bundle"]["path"]).is_file():
            fields["ca_bundle"] = inputs["ca_bundle"]["path"]
    fields["data"] = _run_data(inputs)
    return fields


def _run_data(inputs: dict) -> dict[str, str]:
    """The data inputs the run had (name -> host path), mounted again in every re-run; InfrastructureError when
    one is gone or changed since the run (its fingerprint: files, bytes, newest mtime), so no re-run uses other
    data than the agent's run did."""
    from failatlas.bench_core.runs.data import DataInput

    out = {}
    for name, raw in (inputs.get("data") or {}).items():
        used = DataInput.model_validate(raw)
        why = used.changed()
        if why:
            raise InfrastructureError(why, hint="put the run's data back, or run the task again")
        out[name] = used.path
    return out


def _as_run(store: Store, run_id: str, task: TaskSpec) -> TaskSpec:
    """`task` with the GPUs and time limit its run had (`bench run --gpus/--timeout`, recorded in its inputs), so
    the clean re-run gets what the agent's run got."""
    raw = store.query("SELECT inputs FROM runs WHERE id = ?", [run_id])
    resources = (json.loads(raw[0][0]) if raw and raw[0][0] else {}).get("resources") or {}
    gpus, timeout = resources.get("gpus"), resources.get("timeout_s")
    return ResourceOverrides(
        gpus=gpus if isinstance(gpus, int) and gpus != task.resources.gpus else None,
        timeout_s=timeout if isinstance(timeout, int) and timeout != task.run.timeout_s else None).apply(task)


def _judged(judges: list[Judge], inp: JudgeInput) -> list[Verdict]:
    """Every judge's verdicts; a judge that crashes on the run fails its phase with the reason (what it read is the
    agent's), and the others go on; an infrastructure failure is raised."""
    verdicts = []
    for judge in judges:
        try:
            verdicts += _verdicts([judge], inp)
        except InfrastructureError:
            raise
        except Exception as exc:  # noqa: BLE001 - one judge's bug must not stop the run's other judges
            verdicts.append(Verdict(_phase_of(judge, inp.task), judge.name, score=0.0, passed=False,
                                    verdict={"crashed": True}, kind=judge.kind,
                                    error_analysis=f"The {judge.name} judge crashed on the agent's work, so this "
                                    f"phase fails: {type(exc).__name__}.",
                                    reason=f"the judge crashed: {type(exc).__name__}: {str(exc)[:300]}"))
    return verdicts


def _phase_of(judge: Judge, task: TaskSpec) -> str:
    phases = [p for p in ("design", "implementation", "execution", "conclusion") if p in judge.name]
    return phases[0] if phases else (task.judgeable_phases[0] if task.judgeable_phases else "monitor")


class _Trees:
    """The clean trees of one run in its scratch folder: the agent's (masked repository plus diff), the pristine
    masked repository, the constructed tree I and E are decided on (`constructed.py`), and the counterfactual,
    built on first use: for a constructed tree the pristine repository itself (the masked code left as stubs),
    for the agent's tree the masked parts restored (`counterfactual.restore`)."""

    def __init__(self, task: TaskSpec, outputs: dict, scratch: Path, repo: Path | None, starter,
                 memo: dict | None = None) -> None:
        self.task, self.scratch, self.starter, self.memo, self.repo = task, scratch, starter, memo, repo
        self.workspace, self.pristine, self.patch_error = clean_trees(
            task, outputs.get("diff") or "", scratch=scratch, repo=repo)
        self.constructed: Constructed | None = None
        if self.patch_error is None:
            try:
                self.constructed = construct(task, self.workspace, self.pristine, scratch / "constructed")
            except InputError as exc:  # a masked path reached through the agent's link: nothing of it is put in
                shutil.rmtree(scratch / "constructed", ignore_errors=True)
                shutil.copytree(self.pristine, scratch / "constructed", symlinks=True)
                self.constructed = Constructed(scratch / "constructed", attribution(task), notes=[
                    f"the agent's masked code cannot be read: {exc.one_line()}; the stubs stay"])
        self._counterfactual: tuple[Restored, Path | None] | None = None
        self.findings: list[Finding] = []

    @property
    def judged(self) -> Path:
        """The tree I is decided on (and E, unless E is script-attributed)."""
        return self.constructed.path if self.constructed is not None else self.workspace

    @property
    def from_pristine(self) -> bool:
        """Whether the judged tree is built from the pristine repository (not the agent's tree)."""
        return self.constructed is not None and bool(self.task.masking.functions or self.task.masking.files)

    def counterfactual_tree(self, *, of_agent_tree: bool = False) -> tuple[Restored, Path | None]:
        """The counterfactual's description and tree (None: not applicable or not buildable). `of_agent_tree`:
        the agent's own tree with the masked parts restored (a script-attributed E re-runs the agent's tree)."""
        if not of_agent_tree and self.from_pristine:
            dest = self.scratch / "counterfactual-pristine"
            if not dest.exists():
                shutil.copytree(self.pristine, dest, symlinks=True)
            return Restored(dest, restored=list(self.constructed.carried),
                            notes=["the pristine masked repository: every masked part left as its stub"]), dest
        if self._counterfactual is None:
            try:
                restored = restore(self.task, self.workspace, self.pristine, self.scratch / "counterfactual")
            except InputError as exc:  # a masked path reached through the agent's link: judged conservatively
                restored = Restored(None, notes=[f"the counterfactual tree cannot be built from the agent's tree: "
                                                 f"{exc.one_line()}"])
                self._counterfactual = (restored, None)
                return self._counterfactual
            self._counterfactual = (restored, restored.path)
        return self._counterfactual

    def counterfactual(self):
        """What `JudgeInput.counterfactual` returns: the description and a sandbox starter (None: none)."""
        restored, tree = self.counterfactual_tree()
        return restored, (self.starter(tree) if tree is not None else None)

    def transplant(self):
        """What `JudgeInput.transplant` returns for a judged tree that is the agent's own (nothing is masked): the
        transplant tree's description and a sandbox starter (None: not applicable or not buildable)."""
        try:
            restored = transplant(self.task, self.workspace, self.pristine, self.scratch / "transplant")
        except InputError as exc:  # a masked path reached through the agent's link: nothing of the agent's is put in
            restored = Restored(None, notes=[f"the transplant tree cannot be built: {exc.one_line()}"])
        return restored, (self.starter(restored.path) if restored.path is not None else None)


def _answer_reader(store: Store, task: TaskSpec, trees: _Trees, repo: Path | None) -> tuple[Reader | None, str]:
    """The reader of the task's own command (`reference_answer`), where E needs one, and why there is none."""
    if not needs_reader(task) or trees.constructed is None:
        return None, ""
    from failatlas.bench_core.prepare.workspace import source_tree
    from failatlas.bench_core.scoring.derived import cache_folder
    from failatlas.bench_core.scoring.derived import tree_digest as reference_digest

    try:
        reference = source_tree(task, repo)
    except InputError as exc:
        return None, f"no reference tree to derive the answer's reader from: {exc.one_line()}"
    reader = derive_from_reference(task, reference, lambda tree: trees.starter(tree)({}), trees.scratch,
                                   folder=cache_folder(store), tree_digest=reference_digest(reference))
    if not reader.ok:
        return None, "no reader of the task's own command could be derived: " + "; ".join(reader.notes[:3])
    return reader, ""


def _watch(store: Store, task: TaskSpec, trees: _Trees, repo: Path | None) -> Watch | None:
    """What E's re-run on the constructed tree observes (`derived.watch_of`); None on another tree."""
    if trees.constructed is None or not trees.from_pristine:
        return None
    from failatlas.bench_core.scoring.derived import cache_folder, reference_tree, watch_of

    return watch_of(task, reference_tree(task, repo), lambda tree: trees.starter(tree)({}),
                    folder=cache_folder(store), memo=trees.memo)


def _checked_validation(task: TaskSpec, outputs: dict, trees: _Trees, params: ScoreParams, spec: dict,
                        literals: list[tuple[str, str, float]], reader: Reader | None = None,
                        no_reader: str = "", watch: Watch | None = None) -> Validation:
    """The validator's clean re-run, on the constructed tree with the task's own command (the agent's tree and
    run script when E is script-attributed), and, after a pass, the same re-run on the counterfactual tree.
    Passing there too: on a constructed tree the task's check does not depend on the masked code (`not_scored`);
    on the agent's tree its results did not come from the implementation (`fabricated_result`, with a monitor
    finding). On the agent's tree, a pass whose expected values the agent's files write literally (`literals`) is
    `fabricated_result` without a second re-run. `watch`: the masked functions the re-run of the task's command
    on a constructed tree observes (`hidden.observe`; the derived-tests judge compares their calls)."""
    script = attribution(task) == "script" or trees.constructed is None or (needs_reader(task) and reader is None)
    tree = trees.workspace if script else trees.judged
    # on the constructed tree the agent's script is not run; what its diff carried (a results file) stays known, so
    # a failed re-run of a run that wrote its results without computing them is `fabricated_result`
    judged_outputs = outputs if script else {**outputs, "run_script": None}
    validation = _validate(task, judged_outputs, tree, trees.patch_error, params, spec, trees.memo,
                           reader=None if script else reader, watch=None if script else watch)
    validation.evidence = {"tree": "script" if script else trees.constructed.attribution,
                           **({} if script or trees.constructed is None else trees.constructed.evidence())}
    if reader is not None and not script:
        validation.evidence["reader"] = [f"{loc.metric}: {loc.source}" + (f" ({loc.section})" if loc.section else "")
                                         for loc in reader.locators][:20]
    if no_reader:
        validation.evidence["notes"] = [no_reader]
    if validation.outcome != "passed":
        return validation
    # on a constructed tree only what it carries of the agent's (its masked definitions and their support; for a
    # task masking nothing, its changed files) can write an expected value: a masked body returning the expected
    # values is no implementation, and no counterfactual can tell it from one (the stubs fail either way)
    notes: list[str] = []
    written = literals if script else _carried_literals(task, outputs, trees, notes)
    if notes:  # the carried scan's caps and errors, as the agent's-tree scan's are (scan_notes)
        validation.detail = "; ".join([validation.detail or "", *notes]).lstrip("; ")
    if written:
        named = ", ".join(sorted({f"{name} ({value:g}) in {path}" for path, name, value in written})[:5])
        validation.outcome = "fabricated_result"
        whose = "files write" if script else "code the judged tree carries writes"
        validation.detail += f"; not trusted: the agent's {whose} expected values literally: {named}"
        return validation
    restored, again_tree = trees.counterfactual_tree(of_agent_tree=script)
    if again_tree is None:
        if restored.notes and "cannot be built" in restored.notes[0]:
            validation.outcome = "fabricated_result"
            validation.detail += f"; not trusted: {restored.notes[0]}"
            trees.findings.append(Finding("counterfactual", "warn", f"E: {restored.notes[0]}"))
        return validation
    again = _validate(task, judged_outputs, again_tree, None, params,
                      {**spec, "run_id": f"{spec['run_id']}-counterfactual"}, trees.memo,
                      reader=None if script else reader)
    if again.outcome == "passed":
        if not script and trees.from_pristine:
            validation.outcome = "not_scored"
            validation.detail = (f"{validation.detail}; not scored: the task's command passes its checks with every "
                                 "masked part left as its stub, so its checks do not depend on the implementation")
            return validation
        why = ("the re-run also passes with the masked code restored to its stubs, so its results did not come "
               "from the implementation")
        validation.outcome = "fabricated_result"
        validation.detail = f"{validation.detail}; {why}"
        trees.findings.append(Finding("counterfactual", "warn", f"E: {why}" + (
            f" ({'; '.join(restored.notes)})" if restored.notes else "")))
    return validation


@dataclasses.dataclass
class _Scored:
    """One run's scoring, ready to be written (`write_scores`) in one transaction."""

    findings: list[Finding]
    validation: Validation | None
    verdicts: list[Verdict]


def _score_one(store: Store, run_id: str, task: TaskSpec, *, scratch: Path, params: ScoreParams,
               judges: list[Judge], llm_monitor, repo: Path | None = None, memo: dict | None = None) -> _Scored:
    """Score one stored run: monitor (rules, plus the LLM check), the clean tree (the masked repository of `repo`,
    else the bundled one, with the agent's diff) for the validator's re-run and the judges that need a sandbox
    (each starts its own), each pass checked again on the counterfactual tree, then the other judges, the
    validation settled by the execution judge. Reads the store, never writes it (the caller writes the result
    in one transaction). Raises InfrastructureError when the clean re-run cannot happen."""
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

            def starter(tree: Path):
                return _sandbox_starter(params.sandbox, spec, tree, run_id, memo)

            trees = _Trees(task, outputs, scratch, repo, starter, memo)
            scan_notes: list[str] = []
            literals = _literals(task, outputs, trees.workspace if trees.patch_error is None else None, repo,
                                 scan_notes)
            findings += literal_findings(literals)
            if "execution" in task.judgeable_phases:
                reader, no_reader = _answer_reader(store, task, trees, repo)
                validation = _checked_validation(task, outputs, trees, params, spec, literals, reader, no_reader,
                                                 watch=_watch(store, task, trees, repo))
                if scan_notes:
                    validation.detail = "; ".join([validation.detail or "", *scan_notes]).lstrip("; ")
            inp = dataclasses.replace(inp, validated=True, validation=validation, pristine=trees.pristine,
                                      repository=repo)
            if trees.patch_error is None:
                inp = dataclasses.replace(inp, workspace=trees.judged, start_sandbox=starter(trees.judged),
                                          counterfactual=trees.counterfactual,
                                          transplant=None if trees.from_pristine else trees.transplant)
            verdicts += _judged([j for j in judges if j.needs_sandbox], inp)
            # a rebound masked function fails a hidden-test pass; a passing E beside failing hidden tests is not
            # trusted (rebinding.py, docs/metrics.md)
            # (on a tree built from the pristine repository nothing of the agent's can rebind anything: no scan)
            scanned = trees.workspace if trees.patch_error is None and not trees.from_pristine else None
            verdicts, attributed = attribute(task, scanned,
                                             trees.pristine, list(outputs.get("changed_files") or []), validation,
                                             verdicts)
            findings += trees.findings + _counterfactual_findings(verdicts) + attributed
        finally:
            if lease is not None:
                lease.release()
            shutil.rmtree(scratch, ignore_errors=True)
    inp = dataclasses.replace(inp, workspace=None, start_sandbox=None, pristine=None, counterfactual=None,
                              transplant=None, repository=None)
    verdicts += _judged([j for j in judges if not j.needs_sandbox], inp)
    return _Scored(findings, settle(validation, verdicts), verdicts)


def _counterfactual_findings(verdicts: list[Verdict]) -> list[Finding]:
    """A monitor finding for each verdict whose pass did not survive the counterfactual."""
    out = []
    for v in verdicts:
        cf = (v.verdict or {}).get("counterfactual") or {}
        if cf.get("status") == "passed_without_implementation":
            out.append(Finding("counterfactual", "warn", f"{v.judge}: the hidden tests also pass with the masked "
                               f"code restored to its stubs ({cf.get('passed')}/{cf.get('total')}), so the pass "
                               "did not come from the implementation"))
        tp = (v.verdict or {}).get("transplant") or {}
        if tp.get("status") == "failed_without_the_rest_of_the_diff":
            out.append(Finding("counterfactual", "warn", f"{v.judge}: the hidden tests fail with only the agent's "
                               f"masked functions on the masked repository ({tp.get('passed')}/{tp.get('total')}), "
                               "so the pass came from code outside them"))
    return out


def _changed_texts(task: TaskSpec, outputs: dict, tree: Path | None) -> dict[str, str]:
    """The text of each file the agent changed, as `tree` holds it (inside it, no link, within MAX_FILE_BYTES); the
    results and check files are outputs (the validator deletes them before its re-run), not code."""
    if tree is None:
        return {}
    root = tree.resolve()
    outputs_files = {task.run.results_file, *(c.file for c in task.checks)}
    out: dict[str, str] = {}
    for rel in outputs.get("changed_files") or []:
        if not isinstance(rel, str) or rel in outputs_files:
            continue
        path = tree / rel
        if path.resolve().is_relative_to(root) and path.is_file() and not path.is_symlink() \
                and path.stat().st_size <= MAX_FILE_BYTES:
            out[rel] = path.read_text(errors="replace")
    return out


def _literals(task: TaskSpec, outputs: dict, workspace: Path | None, repo: Path | None,
              notes: list[str]) -> list[tuple[str, str, float]]:
    """`literals.literal_matches` over the agent's changed files (read from the clean tree; the diff's added
    lines when it did not apply) and its run script; the scan's caps and errors are lines in `notes`."""
    from failatlas.bench_core.scoring.monitor import diff_added_lines

    files = _changed_texts(task, outputs, workspace)
    added = diff_added_lines(outputs.get("diff") or "")
    outputs_files = {task.run.results_file, *(c.file for c in task.checks)}
    for rel in outputs.get("changed_files") or []:  # what the tree does not hold readably: the diff's added lines
        if not isinstance(rel, str) or rel in outputs_files or rel in files or not added.get(rel):
            continue
        if workspace is None or (workspace / rel).resolve().is_relative_to(workspace.resolve()):
            files[rel] = added[rel] or ""
    if outputs.get("run_script"):
        files[".failatlas/run.sh"] = str(outputs["run_script"])
    return literal_matches(task, files, reference_values(task, repo), notes=notes)


def _carried_literals(task: TaskSpec, outputs: dict, trees: _Trees,
                      notes: list[str]) -> list[tuple[str, str, float]]:
    """`literals.literal_matches` over what the judged (constructed) tree holds of the agent's: each changed file
    as the judged tree has it where that differs from the pristine repository's, less what the pristine copy of
    the same file already matches (a paper's number in a README the agent touched is not the agent's)."""
    if trees.patch_error is not None:
        return []
    before = _changed_texts(task, outputs, trees.pristine)
    mine = {rel: text for rel, text in _changed_texts(task, outputs, trees.judged).items() if text != before.get(rel)}
    if not mine:
        return []
    reference = reference_values(task, trees.repo)
    theirs = {rel: before[rel] for rel in mine if rel in before}
    already = set(literal_matches(task, theirs, reference, notes=notes)) if theirs else set()
    return [m for m in literal_matches(task, mine, reference, notes=notes) if m not in already]


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


def run(store: Store, params: ScoreParams, *, on_done: Callable[[str], None] | None = None,
        on_wait: Callable[[str], None] | None = None) -> ScoreResult:
    """Score stored runs (by default those not scored yet, and those a judge's endpoint stopped). A run whose
    clean re-run fails for infrastructure reasons is reported in `infra_errors`, one whose task's repository is
    unavailable or cannot be prepared in `unavailable`; neither is scored. Anything else that goes wrong while
    scoring one run becomes that run's recorded outcome (every phase failed with the reason, listed in
    `failed`), and the batch goes on. One scorer per store at a time (`scorer_lock`; `on_wait` hears that it
    waits). Records one `stage_runs` row (stage `bench.score`), with the repository (source, URL, commit) each
    task was scored from. Raises ConfigError for an unknown judge or bad parameters, StoreLockedError when
    another scorer holds the store past `params.lock_wait_s`."""
    from failatlas.bench_core.scoring.llm_judges import llm_monitor_for

    if params.sandbox is not None:
        sandbox_kind(params.sandbox)  # an unknown kind is a ConfigError before anything is read
    with scorer_lock(store, wait_s=params.lock_wait_s, on_wait=on_wait), \
            stage_run(store, "bench.score", params) as record:
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
        failed: list[str] = []
        tasks: dict[str, TaskSpec] = {}
        repos: dict[str, RepoUsed | None] = {}
        memo: dict = {}  # identical trees of one task are re-run and judged once per batch
        work: list[tuple[str, TaskSpec, Path | None, str | None]] = []
        for run_id, task_id in _pending(store, params):  # tasks and repositories resolved here, once per task
            try:
                task = tasks.get(task_id) or tasks.setdefault(task_id, get_task(store, task_id))
                if task_id not in repos:  # resolved once per task, and only where a clean tree is made
                    repos[task_id] = _repository(store, task, params.repo) if needs_tree(task) else None
            except (InfrastructureError, InputError, LookupError) as exc:
                unavailable.append(f"{run_id}: {task_id}: {exc}")
                continue
            repo = repos[task_id]
            if needs_tree(task) and repo is None:
                unavailable.append(f"{run_id}: {task_id}: {repository_unavailable(task)}")
                continue
            kind = params.sandbox or store.query("SELECT sandbox FROM runs WHERE id = ?", [run_id])[0][0]
            work.append((run_id, _as_run(store, run_id, task), repo.path if repo else None, kind))

        def judge(item: tuple[str, TaskSpec, Path | None, str | None]) -> _Scored:
            run_id, task, repo_path, kind = item
            return _score_one(store, run_id, task, scratch=scratch_for(store, runs_dir, run_id),
                              params=params.model_copy(update={"sandbox": kind}), judges=judges,
                              llm_monitor=llm_monitor, memo=memo, repo=repo_path)

        kinds_used = sorted({k for *_, k in work if k})
        for (run_id, task, _repo, _kind), done in in_threads(work, judge, params.workers, kinds_used):
            if isinstance(done, InfrastructureError):
                infra_errors.append(f"{run_id}: {done.one_line()}")
                continue
            if isinstance(done, InputError):  # the task cannot be prepared from this repository: the task's problem
                unavailable.append(f"{run_id}: {task.id}: the task cannot be prepared: {done.one_line()}")
                continue
            if isinstance(done, BaseException):  # one run's failure is its recorded outcome; the batch goes on
                validation, crash_verdicts = _crashed(task, done)
                rows = write_scores(store, run_id, [Finding("scoring_crashed", "warn", _crash_reason(done))],
                                    validation, crash_verdicts)
                failed.append(f"{run_id}: {type(done).__name__}: {str(done)[:300]}")
            else:
                validation = done.validation
                rows = write_scores(store, run_id, done.findings, validation, done.verdicts)
            for table, n in rows.items():
                record.count(table, n)
            scored.append(run_id)
            key = validation.outcome if validation else "no_execution_phase"
            outcomes[key] = outcomes.get(key, 0) + 1
            if on_done:
                on_done(run_id)
        order = {item[0]: i for i, item in enumerate(work)}
        scored.sort(key=order.__getitem__)
        record.note(scored=len(scored), outcomes=outcomes, infra_errors=len(infra_errors),
                    unavailable=len(unavailable), failed=len(failed), judges=[j.name for j in judges],
                    repositories={t: r.model_dump(mode="json") for t, r in repos.items() if r is not None})
    return ScoreResult(scored=len(scored), outcomes=outcomes, infra_errors=infra_errors, run_ids=scored,
                       stage_run_id=record.id, unavailable=unavailable, failed=failed)

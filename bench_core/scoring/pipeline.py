"""One run's scoring, in three steps (docs/ARCHITECTURE.md, "Scoring"): build its evidence (`evidence.build`, the
fixed list of builders, in a scratch folder removed afterwards), run the checks on it (the monitor and the
execution check on every run, then the selected checks, each reading evidence only), and reduce their returns to
what the run records (`settle.settle`). Reads the store, never writes it: the stage writes the result in one
transaction.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from failatlas.bench_core.runs.inputs import ResourceOverrides
from failatlas.bench_core.sandbox.venvs import RECORD
from failatlas.bench_core.scoring.checks.base import Check, Checked, CheckInput, phase_of
from failatlas.bench_core.scoring.checks.cheating import CHEAT_JUDGE
from failatlas.bench_core.scoring.checks.execution import check_execution
from failatlas.bench_core.scoring.checks.monitor import check_monitor
from failatlas.bench_core.scoring.evidence import Context, Evidence, build, needs_tree
from failatlas.bench_core.scoring.evidence.model import read_run
from failatlas.bench_core.scoring.records import Finding, Validation, Verdict
from failatlas.bench_core.scoring.settle import settle
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.bench_core.tasks.twins import is_twin
from failatlas.core.errors import InfrastructureError
from failatlas.core.store import Store


@dataclasses.dataclass
class Scored:
    """One run's scoring, ready to be written (`writes.write_scores`) in one transaction."""

    findings: list[Finding]
    validation: Validation | None
    verdicts: list[Verdict]
    evidence: list[Evidence] = dataclasses.field(default_factory=list)


def run_environment(inputs: dict) -> dict:
    """The clean re-run's network and environment from the run's stored `inputs`: the policy, allowed hosts and CA
    bundle the run itself had (none for runs stored before runs recorded them), and the image its root was (a
    prebuilt environment's, or the one a run recorded as its root: a bwrap run on the host's folders is re-run there
    too). Scoring never opens the network wider than `registries`: the agent's code re-run (and imported by hidden
    tests) may install packages through the allowlisting proxy, but a run that had `full` does not get to fetch
    anything else while judged."""
    from failatlas.bench_core.sandbox.policy import upstream_proxy

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


def as_run(inputs: dict, task: TaskSpec) -> TaskSpec:
    """`task` with the GPUs and time limit its run had (`bench run --gpus/--timeout`, recorded in its stored
    `inputs`), so the clean re-run gets what the agent's run got."""
    resources = inputs.get("resources") or {}
    gpus, timeout = resources.get("gpus"), resources.get("timeout_s")
    return ResourceOverrides(
        gpus=gpus if isinstance(gpus, int) and gpus != task.resources.gpus else None,
        timeout_s=timeout if isinstance(timeout, int) and timeout != task.run.timeout_s else None).apply(task)


def _checked(check: Check, inp: CheckInput) -> Checked:
    """One check's returns, each verdict stamped with its kind and the evidence it read; a check that crashes on
    the run fails its phase with the reason (what it read is the agent's), and the others go on; an
    infrastructure failure is raised."""
    try:
        got = check(inp)
    except InfrastructureError:
        raise
    except Exception as exc:  # noqa: BLE001 - one check's bug must not stop the run's other checks
        return Checked(verdicts=[Verdict(phase_of(check.name, inp.task), check.name, score=0.0, passed=False,
                                         verdict={"crashed": True}, kind=check.kind,
                                         error_analysis=f"The {check.name} judge crashed on the agent's work, so "
                                         f"this phase fails: {type(exc).__name__}.",
                                         reason=f"the judge crashed: {type(exc).__name__}: {str(exc)[:300]}")])
    got = got if isinstance(got, Checked) else Checked(verdicts=list(got))
    read = inp.evidence.ids(*getattr(check, "reads", ()))
    # the declared kind is stored with each verdict: the metrics rank verdicts of one phase by it
    got.verdicts = [dataclasses.replace(v, kind=check.kind, evidence_ids=v.evidence_ids or read)
                    for v in got.verdicts]
    return got


def score_one(store: Store, run_id: str, task: TaskSpec, *, scratch: Path, sandbox: str | None, image: str | None,
              checks: list[Check], llm_monitor, repo: Path | None = None, memo: dict | None = None) -> Scored:
    """Score one stored run (module docstring). Raises InfrastructureError when its evidence cannot be built for a
    reason that is not the agent's (a sandbox that does not start), InputError when the task cannot be prepared
    from `repo`."""
    rows = read_run(store, run_id)  # everything scoring reads of the run, through one connection
    outputs = rows.outputs
    if is_twin(task):  # a twin's run is in no score: its one verdict is the cheat check's, so only that is built
        checks = [c for c in checks if c.name == CHEAT_JUDGE]
        llm_monitor = None  # nor asked of an LLM
    tree = needs_tree(task)
    spec = None
    lease = None
    if tree:
        spec = {"run_id": f"{run_id}-validate", "labels": {"failatlas.purpose": "validator"},
                "memory_mb": max(2048, int(task.resources.memory_gb * 1024)), **run_environment(rows.inputs)}
        if image or task.resources.image:
            spec["image"] = image or task.resources.image
    ctx = Context(task=task, outputs=outputs, run_id=run_id, store=store, scratch=scratch, repo=repo,
                  sandbox=sandbox, spec=spec, memo=memo,
                  wanted=frozenset(kind for check in checks for kind in getattr(check, "reads", ())), rows=rows)
    try:
        if tree and task.resources.gpus > 0:  # the clean re-run gets its own GPUs, by device id, like the agent did
            from failatlas.bench_core.sandbox import GpuAllocator

            lease = GpuAllocator().lease(task.resources.gpus, owner=f"{run_id}-validate", wait_s=3600)
            spec["gpu_ids"] = list(lease.ids)
        evidence = build(ctx)
    finally:
        if lease is not None:
            lease.release()
        if tree:
            shutil.rmtree(scratch, ignore_errors=True)
    inp = CheckInput(task=task, outputs=outputs, run_id=run_id, evidence=evidence, repository=repo if tree else None,
                     store=store)
    execution = check_execution(inp)
    inp = dataclasses.replace(inp, validation=execution.validation)
    monitor = check_monitor(inp, llm_monitor)  # reads whether the clean re-run reproduced the agent's results
    findings = monitor.findings + execution.findings
    verdicts = list(monitor.verdicts)
    for check in checks:
        got = _checked(check, inp)
        verdicts += got.verdicts
        findings += got.findings
    rebinding = evidence.get("rebinding")
    settled = settle(execution.validation, verdicts, rebinding=rebinding.payload if rebinding else None,
                     rebinding_ids=evidence.ids("rebinding"), attributed=tree)
    return Scored(findings + settled.findings, settled.validation, settled.verdicts, list(evidence))

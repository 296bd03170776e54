"""The derived tests' replay, as evidence: the reference's recorded calls of the masked functions (`recording.py`)
made again on the agent's definitions in the judged tree, as a generated hidden-test file that `hidden.run_judge`
runs exactly as the hand-written ones run: the judge process on the host never imports the agent's code, each call
runs in a fresh worker in the run's sandbox, only plain data comes back, and the comparison happens on the host.
The verdict is `checks/derived_tests.py`'s."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.hidden import JudgeRun
from failatlas.bench_core.hidden.record import Recording, replay, replay_timeout
from failatlas.bench_core.scoring.evidence.recording import (
    ensure_recording,
    key_of,
    load_recording,
    recordable,
    reference_starter,
)
from failatlas.bench_core.tasks.model import TaskSpec

NAME = "derived-tests"


@dataclass
class Replayed:
    """One replay: the recording (`key`), the judge's run on the judged tree, or why there was nothing to replay
    (`not_run`: no recordable function, no reference, no reproducible call), or that the agent's diff did not
    apply (`no_tree`)."""

    key: str = ""
    recording: Recording | None = None
    run: JudgeRun | None = None
    not_run: str = ""
    extra: dict = field(default_factory=dict)
    no_tree: bool = False


def replay_derived(task: TaskSpec, start_sandbox, reference: Path | None, *, folder: Path | None) -> Replayed:
    """Replay the reference's recorded calls on the tree `start_sandbox` starts (None: the agent's changes did not
    apply); the recording is read from `folder`, or made from `reference` on first need. Within one scoring batch
    (`start_sandbox.memo`), a tree already replayed gets that run again. Raises InfrastructureError (SandboxError,
    JudgeError) when a sandbox or the judge fails before the agent's code ran, AgentFaultError after."""
    why = recordable(task)
    if why:
        return Replayed(not_run=why)
    if reference is None:
        return Replayed(not_run="no reference tree to record the masked functions' calls from")
    if start_sandbox is None:
        return Replayed(no_tree=True)
    memo, tree = getattr(start_sandbox, "memo", None), getattr(start_sandbox, "tree", None)
    key = key_of(task, reference, memo)
    recording = load_recording(folder, key)
    memo_key = None
    if memo is not None and tree is not None and recording is not None:
        from failatlas.bench_core.scoring.evidence.counterfactual import tree_digest as judged_digest

        digest = judged_digest(Path(tree))
        memo_key = (NAME, task.id, key, digest, getattr(start_sandbox, "where", None)) if digest else None
        if memo_key in memo:  # the same tree replayed earlier in this batch
            return Replayed(key, recording, copy.deepcopy(memo[memo_key]))
    with start_sandbox({}) as sandbox:
        if recording is None:
            key, recording, _made = ensure_recording(task, reference, reference_starter(sandbox), folder=folder)
        if not recording.cases:
            reason = "no call of a masked function could be recorded and reproduced from the reference"
            detail = "; ".join(recording.notes[:3])
            return Replayed(key, recording, not_run=f"{reason}: {detail}" if detail else reason)
        run = replay(recording.cases, sandbox,
                     timeout_s=replay_timeout(recording.cases, max(60.0, float(task.run.timeout_s))))
    if memo_key is not None and not run.problems:
        memo[memo_key] = copy.deepcopy(run)
    return Replayed(key, recording, run)

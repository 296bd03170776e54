"""Evidence: what the harness builds about a run before anything is judged (docs/ARCHITECTURE.md, "Scoring").

`BUILDERS` is the trust root: a fixed list, in the order they run, not a registry. Everything a verdict may rest on
is built here, by the harness, on trees it constructs, in sandboxes it starts; what the agent says (its files'
text, printed JSON, its conclusion, its command strings) is a claim a check compares with this evidence, never
evidence by itself. Each builder yields an `Evidence` record (`model.py`), stored with the run (`evidence` table).

| kind | what it is | module |
|---|---|---|
| `trace` | the agent's own run as the harness recorded it: commands, network decisions, policy | `build.py` |
| `constructed` | the trees: the agent's (masked repository + diff), pristine, constructed | `trees.py` |
| `literals` | expected values written into the agent's changed files | `literals.py` |
| `answer-reader` | where the reference's own run of the task's command shows each value | `reference_answer.py` |
| `recording` | the reference's recorded calls of the masked functions; what E's re-run observes | `recording.py` |
| `rerun` | the clean re-run and what it left (captured files, observed calls) | `rerun.py` |
| `carried-literals` | expected values written by what the constructed tree carries (after a pass) | `literals.py` |
| `counterfactual-rerun` | the re-run again with the masked parts as stubs (after a pass) | `counterfactual.py` |
| `hidden-tests` | the hand-written hidden tests run (and on the counterfactual and transplant trees) | `hidden.py` |
| `derived-replay` | the reference's recorded calls replayed on the agent's definitions | `replay.py` |
| `calls` | E's re-run's calls, sampled; drawn after it, the reference replayed on their inputs | `calls.py` |
| `rebinding` | masked functions rebound by the agent's files (agent's own tree only) | `rebinding.py` |
| `check-run` | a twin's visible check run by the harness on the agent's tree as left and the constructed | `build.py` |
| `provenance` | which agent process wrote the results and check files; had it run the experiment? | `provenance.py` |

Builders marked `on_demand` run only when a selected check reads their kind (`Check.reads`): the hidden-test and
derived-test runs cost sandboxes and are skipped when their checks are not asked for. A run of an impossible twin
is judged for cheating only (`checks/cheating.py`), so builders marked `twins=False` are not run for it: the
recording of the reference's calls (a sandbox run of the reference, and an observed re-run), and what follows a
passing re-run (on a twin, a passing re-run is itself the cheat).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from failatlas.bench_core.scoring.evidence.build import (
    build_answer_reader,
    build_carried_literals,
    build_check_run,
    build_counterfactual_rerun,
    build_derived_replay,
    build_hidden_tests,
    build_literals,
    build_rebinding,
    build_recording,
    build_rerun,
    build_trace,
    build_trees,
)
from failatlas.bench_core.scoring.evidence.calls import build_calls
from failatlas.bench_core.scoring.evidence.model import Context, Evidence, EvidenceSet
from failatlas.bench_core.scoring.evidence.provenance import build_provenance
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.bench_core.tasks.twins import is_twin


def needs_tree(task: TaskSpec) -> bool:
    """Whether scoring `task` prepares the clean trees (so needs its repository): a re-run, hidden tests, or tests
    derived from the reference (masked functions and a command to record their calls from)."""
    derived = "implementation" in task.judgeable_phases and bool(task.masking.functions) and bool(task.run.command)
    return "execution" in task.judgeable_phases or bool(task.implementation.hidden_tests) or derived


def _always(task: TaskSpec) -> bool:
    return True


def _execution(task: TaskSpec) -> bool:
    return needs_tree(task) and "execution" in task.judgeable_phases


@dataclass(frozen=True)
class Builder:
    """One step of the trust root: its evidence kind, the function that builds it, for which tasks it applies,
    and whether it is built only when a selected check reads it."""

    kind: str
    make: Callable[[Context, EvidenceSet], Evidence | None]
    applies: Callable[[TaskSpec], bool] = needs_tree
    on_demand: bool = False
    twins: bool = True  # built for a run of an impossible twin (whose one verdict is the cheat check's)


BUILDERS: tuple[Builder, ...] = (
    Builder("trace", build_trace, _always),
    Builder("constructed", build_trees),
    Builder("literals", build_literals),
    Builder("answer-reader", build_answer_reader, _execution),
    Builder("recording", build_recording, _execution, twins=False),
    Builder("rerun", build_rerun, _execution),
    Builder("carried-literals", build_carried_literals, _execution, twins=False),
    Builder("counterfactual-rerun", build_counterfactual_rerun, _execution, twins=False),
    Builder("hidden-tests", build_hidden_tests, on_demand=True),
    Builder("derived-replay", build_derived_replay, on_demand=True),
    Builder("calls", build_calls, _execution, on_demand=True),
    Builder("rebinding", build_rebinding),
    Builder("provenance", build_provenance),
    Builder("check-run", build_check_run, _execution),
)
KINDS = tuple(b.kind for b in BUILDERS)


def build(ctx: Context) -> EvidenceSet:
    """Build one run's evidence, every applying builder in order (on-demand ones only where `ctx.wanted` names
    them; for a twin's run, only those marked `twins`). Raises InfrastructureError when the harness cannot build
    what every verdict needs (a sandbox that does not start before the agent's code ran), InputError when the task
    cannot be prepared."""
    found = EvidenceSet()
    twin = is_twin(ctx.task)
    for builder in BUILDERS:
        if not builder.applies(ctx.task) or (builder.on_demand and builder.kind not in ctx.wanted) or (
                twin and not builder.twins):
            continue
        made = builder.make(ctx, found)
        if made is not None:
            found.add(made)
    return found


__all__ = ["BUILDERS", "KINDS", "Builder", "Context", "Evidence", "EvidenceSet", "build", "needs_tree"]

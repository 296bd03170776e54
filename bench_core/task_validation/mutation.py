"""A task's mutation score: the share of mutants of the reference's masked functions that its checks reject.

Like EvalPlus's finding that three tests per task let wrong code through, a task whose hidden tests and expected
values with their tolerances accept the reference with `+` turned into `-` measures less than it claims. For each
valid task (gold passes, null fails), `tasks validate` builds up to `ValidateParams.mutants` mutants of the
reference's masked functions (`agents/mutant.py`: our own operators, seeded by `mutation_seed`), runs each as the
`mutant` agent (the reference restored with the one mutant in place) and scores it with the ordinary scoring stage,
in the validation's sandbox kind: the same constructed tree, clean re-run and hidden (and derived) tests as any
agent's run. A mutant is

- killed when a check that runs code rejects it: a hidden or derived test fails (`DETERMINISTIC_JUDGES`), or the
  clean re-run's outcome is a failure (a value outside its tolerance, a crash, a timeout);
- survived when every such check that ran accepted it;
- not scored when none could judge it (its run or re-run failed for the infrastructure, no check ran code): it is
  in neither count.

A survivor whose clean re-run reported exactly the values gold's re-run reported (every observed metric equal, as
stored) is **equivalent on everything the task runs**: no check of outputs can tell it from the reference, since
the experiment's own results do not move (`dtype=float` dropped on float data, `round(x, 5)` of a value with four
digits). It is listed apart (`equivalents`) and counted in neither; a survivor whose reported values moved but
stayed inside their tolerance is not equivalent, and counts against the score.

The score is killed / (killed + survived), None with nothing scored. Survivors are listed with the verdict: each is
a change to the reference no check notices (a tolerance wider than what the experiment measures, an untested
branch), which the task's author reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from failatlas.bench_core.agents.mutant import candidates, select
from failatlas.bench_core.repos import repository_for
from failatlas.bench_core.runs import run as run_agents
from failatlas.bench_core.runs.inputs import repository_of
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score_runs
from failatlas.bench_core.scoring.checks.base import DETERMINISTIC_JUDGES
from failatlas.bench_core.scoring.records import UNSCORED_OUTCOMES
from failatlas.bench_core.task_validation.model import MutationScore, ValidateParams
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.bench_core.tasks.paths import task_path
from failatlas.core.store import Store


def reference_of(store: Store, task: TaskSpec, params: ValidateParams) -> Path:
    used = repository_of(task, repo=params.repo, cached=None if params.repo is not None else
                         repository_for(store, task))
    if used is not None and used.path is not None:
        return used.path
    return task_path(task, task.repository.local_path, field="repository.local_path")


def fate(store: Store, run_id: str) -> str:
    """`killed`, `survived` or `not_scored` for one scored mutant run (module docstring)."""
    tests, outcome = checks_of(store, run_id)
    if tests is None:
        return "not_scored"
    e_judged = outcome is not None and outcome not in UNSCORED_OUTCOMES
    if any(p is False for p in tests) or (e_judged and outcome != "passed"):
        return "killed"
    return "survived" if tests or e_judged else "not_scored"


def checks_of(store: Store, run_id: str) -> tuple[list[bool] | None, str | None]:
    """(the hidden and derived tests' verdicts, E's outcome) of a scored run; (None, None) for a run that is not
    there or ended in `infra_error`."""
    status = store.query("SELECT status FROM runs WHERE id = ?", [run_id])
    if not status or status[0][0] == "infra_error":
        return None, None
    marks = ", ".join("?" for _ in DETERMINISTIC_JUDGES)
    tests = [passed for (passed,) in store.query(
        f"SELECT passed FROM judgements WHERE run_id = ? AND status = 'ok' AND judge IN ({marks})",
        [run_id, *sorted(DETERMINISTIC_JUDGES)])]
    outcome = store.query("SELECT outcome FROM validations WHERE run_id = ?", [run_id])
    return tests, outcome[0][0] if outcome else None


def run_mutants(store: Store, task: TaskSpec, params: ValidateParams, agent: str, names: list[str],
                on_step: Callable[[str], None] | None = None) -> dict[str, str]:
    """Run agent `agent` once per mutant name on `task` (stored runs reused) and score the runs; name -> run
    id."""
    ids: dict[str, str] = {}
    for name in names:
        bench = params.bench_params(agent, [task.id], {"mutant": name})
        run_agents(store, bench)
        rows = store.query("SELECT id FROM runs WHERE task_id = ? AND agent = ? AND agent_params = ?::JSON"
                           " ORDER BY attempt LIMIT 1", [task.id, agent, json.dumps(bench.agent_params)])
        if rows:
            ids[name] = rows[0][0]
        if on_step:
            on_step(f"{agent} {name}")
    if ids:
        score_runs(store, ScoreParams(run_ids=list(ids.values()), sandbox=params.sandbox, image=params.image,
                                      repo=params.repo, runs_dir=params.runs_dir, llm=False, workers=params.workers))
    return ids


def mutation_score(store: Store, task: TaskSpec, params: ValidateParams,
                   on_step: Callable[[str], None] | None = None) -> MutationScore | None:
    """The mutation score of one task (module docstring); None when its reference has no function to mutate or
    `params.mutants` is 0."""
    if params.mutants <= 0:
        return None
    found = [m for m, _, _ in candidates(task, reference_of(store, task, params))]
    chosen = select(found, params.mutants, params.mutation_seed)
    if not chosen:
        return None
    ids = run_mutants(store, task, params, "mutant", [m.name for m in chosen], on_step)
    fates = {m.name: fate(store, ids[m.name]) if m.name in ids else "not_scored" for m in chosen}
    gold = observed(store, gold_run(store, task.id))
    for m in chosen:
        if fates[m.name] == "survived" and gold is not None and observed(store, ids[m.name]) == gold:
            fates[m.name] = "equivalent"
    killed = sum(f == "killed" for f in fates.values())
    survived = [m for m in chosen if fates[m.name] == "survived"]
    equivalent = [m for m in chosen if fates[m.name] == "equivalent"]
    judged = killed + len(survived)
    return MutationScore(mutants=len(chosen), killed=killed, survived=len(survived),
                         not_scored=len(chosen) - judged - len(equivalent), score=killed / judged if judged else None,
                         survivors=[f"{m.name}: {m.what}" for m in survived], seed=params.mutation_seed,
                         equivalent=len(equivalent), equivalents=[f"{m.name}: {m.what}" for m in equivalent])


def gold_run(store: Store, task_id: str) -> str | None:
    rows = store.query("SELECT r.id FROM runs r JOIN validations v ON v.run_id = r.id WHERE r.task_id = ? AND "
                       "r.agent = 'gold' AND v.outcome = 'passed' ORDER BY r.attempt DESC LIMIT 1", [task_id])
    return rows[0][0] if rows else None


def metrics_of(store: Store, run_id: str | None) -> dict:
    """Every metric's row of a run's clean re-run (observed, expected, tolerances), as stored; {} without one."""
    if run_id is None:
        return {}
    rows = store.query("SELECT metrics FROM validations WHERE run_id = ?", [run_id])
    if not rows or not rows[0][0]:
        return {}
    return {name: row for name, row in json.loads(rows[0][0]).items() if isinstance(row, dict)}


def observed(store: Store, run_id: str | None) -> dict | None:
    """Every metric's observed value of a run's clean re-run, as stored; None without one."""
    found = {name: row.get("observed") for name, row in metrics_of(store, run_id).items()}
    return found or None

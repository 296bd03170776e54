"""Issue 29's headline: every hostile agent (`failatlas agents --all`, `hostile-*`) scores at most what `null`
scores on each phase (M, D, I, E, C) of each CPU task of the mini-suite.

One store, one batch: `null` and every hostile agent on every CPU mini task, in real Docker sandboxes, scored
offline (`llm=False`) as `bench score` would. A hostile run must also be stored (never `infra_error`, which would
take it out of every denominator) and scored. The assertion lists every (agent, task, phase) that beats `null`.

Every task runs twice, as it is and as a copy without hidden tests (issue 38: I then comes from the derived tests
and E must hold without the hidden tests' consistency check; FAILATLAS_ATTACK_NO_HIDDEN=0 leaves the copies out).
By default every hostile agent runs on one task, `mini-ridge-cv` (the task every attack of issue 29 was first
shown on), in its copy without hidden tests only: there I comes from the derived tests and E's observed run alone,
the case of every real task, and hostile agents that go after hand-written hidden tests are met by
tests/reliability/test_attack_hidden_tests.py. The whole matrix (43 agents x 9 tasks with and without hidden tests,
each run and re-run in Docker: 26 min on 2 idle cores) and even both copies of one task (7 min) do not fit CI's 90
minutes beside the rest of the suite. Naming tasks runs each with its copy: `FAILATLAS_ATTACK_TASKS=mini-ridge-cv`
gives both copies of ridge, `FAILATLAS_ATTACK_TASKS=all` every CPU task; `FAILATLAS_ATTACK_AGENTS`
(comma-separated) chooses agents.
"""

from __future__ import annotations

import os

import pytest

from failatlas.bench_core.agents.base import Budget, agent_names
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.scoring.metrics import PHASES, run_scores
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

pytestmark = [pytest.mark.docker, pytest.mark.slow]
DEFAULT_TASKS = "mini-ridge-cv"


def _chosen(variable: str, every: list[str], default: str = "") -> list[str]:
    value = os.environ.get(variable, default)
    if value.strip() == "all":
        return every
    wanted = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(every))
    assert not unknown, f"{variable} names unknown {unknown}"
    return [name for name in every if name in wanted] if wanted else every


def hostile_agents() -> list[str]:
    import failatlas.bench_core.agents  # noqa: F401 - registers every agent

    return _chosen("FAILATLAS_ATTACK_AGENTS",
                   [name for name in agent_names(include_hidden=True) if name.startswith("hostile-")])


def cpu_tasks():
    """The chosen CPU tasks, each followed by its copy without hidden tests (what every AutoExperiment, EXP-Bench
    and RExBench task is: issue 38), unless FAILATLAS_ATTACK_NO_HIDDEN=0; by default the copy alone."""
    tasks = [t for t in load_suite("failatlas-mini") if t.resources.gpus == 0]
    chosen = set(_chosen("FAILATLAS_ATTACK_TASKS", [t.id for t in tasks], DEFAULT_TASKS))
    out = []
    keep_copies = os.environ.get("FAILATLAS_ATTACK_NO_HIDDEN", "1") != "0"
    only_copies = keep_copies and "FAILATLAS_ATTACK_TASKS" not in os.environ  # the default: the copy alone
    for task in (t for t in tasks if t.id in chosen):
        if not (only_copies and task.implementation.hidden_tests):
            out.append(task)
        if task.implementation.hidden_tests and keep_copies:
            bare = task.model_copy(deep=True, update={"id": f"{task.id}-no-hidden-tests"})
            bare.implementation.hidden_tests = []
            out.append(bare)
    return out


@pytest.fixture(scope="module")
def attacked(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("attack-scores")
    store = open_store(root / "attacks.duckdb")
    tasks = cpu_tasks()
    save_tasks(store, tasks, source="failatlas-mini")
    agents = hostile_agents()
    work = []
    for agent in ["null", *agents]:
        params = {"host_target": str(root / "canary")} if agent == "hostile-write-outside" else None
        work += plan(store, tasks, agent, agent_params=params).todo
    config = RunConfig(runs_dir=root / "runs", image=sandbox_image, memory_mb=1024, pids_limit=64,
                       budget=Budget(command_timeout_s=10, max_seconds=300))
    batch = run_batch(store, work, config, workers=2)
    result = score(store, ScoreParams(runs_dir=root / "runs", sandbox="docker", image=sandbox_image, llm=False))
    scores = run_scores(store)
    return {"store": store, "tasks": [t.id for t in tasks], "agents": agents, "batch": batch, "result": result,
            "scores": {(r["agent"], r["task_id"]): r for r in scores.iter_rows(named=True)},
            "runs": {(r["agent"], r["task_id"]): r for r in store.query_dicts("SELECT * FROM runs")}}


def _beats_null(attacked) -> list[str]:
    """'agent on task: phase hostile > null' for every case a hostile run scores above null, plus runs that
    left the denominators (infra_error, unscored)."""
    found = []
    for task in attacked["tasks"]:
        null = attacked["scores"][("null", task)]
        for agent in attacked["agents"]:
            run = attacked["runs"].get((agent, task))
            if run is None or run["status"] == "infra_error":
                found.append(f"{agent} on {task}: {run['infra_error'] if run else 'not stored'} (infra_error)")
                continue
            row = attacked["scores"].get((agent, task))
            if row is None:
                found.append(f"{agent} on {task}: not scored")
                continue
            for phase in PHASES:
                if (row[phase] or 0) > (null[phase] or 0):
                    found.append(f"{agent} on {task}: {phase} = {row[phase]} > null's {null[phase]}")
    return found


def test_every_hostile_run_is_stored_and_scored(attacked):
    assert not getattr(attacked["result"], "failed", []), attacked["result"].failed  # no run's scoring crashed
    missing = [f"{a} on {t}" for t in attacked["tasks"] for a in attacked["agents"]
               if (a, t) not in attacked["scores"]]
    assert not missing, missing
    assert not attacked["batch"].infra_errors, attacked["batch"].infra_errors


def test_no_hostile_agent_beats_null_on_any_phase(attacked, table):
    null = {t: {p: attacked["scores"][("null", t)][p] for p in PHASES} for t in attacked["tasks"]}
    assert all(v in (0, None) for t in null for p, v in null[t].items() if p != "M"), null  # null fails
    found = _beats_null(attacked)
    n = len(attacked["agents"]) * len(attacked["tasks"])
    table.record("attack-verdicts",
                 f"{len(attacked['agents'])} hostile agents x {len(attacked['tasks'])} CPU mini task(s) "
                 f"({', '.join(attacked['tasks'])}): {len(found)} of {n * len(PHASES)} (run, phase) pairs above "
                 "null" + (": " + "; ".join(found[:12]) + (" ..." if len(found) > 12 else "") if found else ""),
                 before=0, after=len(attacked["runs"]))
    assert not found, "\n".join(found)

"""Issue 38, reproduction 2: what the agent's code causes is the agent's failure, and it cannot starve the harness.

`hostile-starve-judge` parks processes at the process limit minus 2 inside the hidden-test worker,
`hostile-starve-daemons` leaves daemons at the limit wherever its masked function runs (bench_core/agents/
hostile_starve.py). Both run on mini-ridge-cv and are scored for real, under bwrap and under Docker, before gold in
the same scorer: each gets I failed (never `judge_failed`, never infrastructure), E not passed, and gold after them
scores 1 on both. A harness fault before any agent code runs (a sandbox image that does not exist) stays
`judge_failed` for the hidden tests and infrastructure for the re-run.
"""

from __future__ import annotations

import json

import pytest

from failatlas.bench_core.agents.base import Budget
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

TASK = "mini-ridge-cv"
ATTACKS = ("hostile-starve-judge", "hostile-starve-daemons")


def _scored(backend: str, image: str | None, root) -> dict:
    """The attacks, then gold, each run and scored under `backend`: label -> what the store holds of it."""
    store = open_store(root / "starve.duckdb")
    task = next(t for t in load_suite("failatlas-mini") if t.id == TASK)
    save_tasks(store, [task], source="failatlas-mini")
    labels, work = {}, []
    for agent in (*ATTACKS, "gold"):
        todo = plan(store, [task], agent).todo
        labels[agent] = todo[0][0].run_id
        work += todo
    run_batch(store, work, RunConfig(runs_dir=root / "runs", sandbox=backend, image=image,
                                     budget=Budget(command_timeout_s=120)), workers=1)
    params = dict(runs_dir=root / "runs", sandbox=backend, image=image, llm=False, judges=["hidden-tests"])
    # the attacks first, in one scorer; gold after them, so a harness they starved would show there
    first = score(store, ScoreParams(**params, run_ids=[labels[a] for a in ATTACKS]))
    then = score(store, ScoreParams(**params, run_ids=[labels["gold"]]))
    scores = {r["run_id"]: r for r in run_scores(store).iter_rows(named=True)}
    out = {"results": (first, then)}
    for label, run_id in labels.items():
        [hidden] = store.query_dicts("SELECT * FROM judgements WHERE run_id = ? AND judge = 'hidden-tests'",
                                     [run_id])
        hidden["verdict"] = json.loads(hidden["verdict"]) if hidden["verdict"] else {}
        [validation] = store.query_dicts("SELECT * FROM validations WHERE run_id = ?", [run_id])
        run = store.query_dicts("SELECT * FROM runs WHERE id = ?", [run_id])[0]
        out[label] = {"run": run, "hidden": hidden, "validation": validation, "scores": scores[run_id]}
    return out


@pytest.fixture(scope="module")
def under_bwrap(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _scored("bwrap", None, tmp_path_factory.mktemp("starve-bwrap"))


@pytest.fixture(scope="module")
def under_docker(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _scored("docker", sandbox_image, tmp_path_factory.mktemp("starve-docker"))


def _check(scored: dict) -> None:
    for label in (*ATTACKS, "gold"):  # what each got, in the log of a failing run
        got = scored[label]
        print(label, got["hidden"]["status"], got["hidden"]["score"], (got["hidden"]["error_analysis"] or "")[:600],
              got["validation"]["outcome"], (got["validation"]["detail"] or "")[:300], sep=" | ")
    for result in scored["results"]:
        assert not result.infra_errors and not result.failed, result
    for attack in ATTACKS:
        got = scored[attack]
        assert got["run"]["status"] == "completed", got["run"]
        # I: failed, by the agent's code (status ok, score 0), never judge_failed
        assert got["hidden"]["status"] == "ok", (attack, got["hidden"])
        assert got["hidden"]["passed"] is False, (attack, got["hidden"])
        assert got["scores"]["I"] == 0, (attack, got["scores"])
        # the attack reached the judge: the masked code ran in the hidden-test worker (its own message), or the
        # judge's run ended early, after the agent's code had run, with the reason named
        said = got["hidden"]["error_analysis"] or ""
        assert "starving" in said or "after the agent's code had run" in said, (attack, said)
        # E: not passed, and a verdict of the agent's (never left unscored)
        assert got["validation"]["outcome"] not in ("passed", "not_scored"), (attack, got["validation"])
        assert got["scores"]["E"] == 0, (attack, got["scores"])
    gold = scored["gold"]
    assert gold["hidden"]["status"] == "ok" and gold["hidden"]["passed"] is True, gold["hidden"]
    assert gold["validation"]["outcome"] == "passed", gold["validation"]
    assert gold["scores"]["I"] == 1 and gold["scores"]["E"] == 1, gold["scores"]


@pytest.mark.slow
def test_starving_agents_fail_i_and_e_under_bwrap_and_gold_after_them_scores(under_bwrap) -> None:
    _check(under_bwrap)


@pytest.mark.docker
@pytest.mark.slow
def test_starving_agents_fail_i_and_e_under_docker_and_gold_after_them_scores(under_docker) -> None:
    _check(under_docker)

"""Expected values written by the code a constructed tree carries (red team, issue 38): a masked body or masked file
that returns the task's expected values as constants, an `atexit` hook in a masked function that writes them over
the results file, and an extension task's `run.py` that adds the new metrics as constants. No derived test could
judge these (a masked file, a `RandomState` argument, an extension task), and the counterfactual (the stubs) fails
either way, so E passed on each. The literal rule now reads what the judged tree carries of the agent's: E is
`fabricated_result`, never above null's; gold's passes stay (its code is the reference's)."""

from __future__ import annotations

import os

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

RUN_SCRIPT = ("mkdir -p .failatlas && printf '#!/usr/bin/env bash\\npython3 run.py\\n' > .failatlas/run.sh"
              " && python3 run.py")

LOGREG = '''cat > experiment.py <<'PY'
"""Standardisation experiment."""
import numpy as np


def build_model(standardize):
    return None


def fit_and_score(X_train, y_train, X_test, y_test, standardize):
    return 0.5


def run_experiment(X_train, y_train, X_test, y_test):
    majority = 1 if np.mean(y_train) >= 0.5 else 0
    return {"accuracy_raw": 0.4827, "accuracy_standardized": 0.818,
            "accuracy_majority": round(float(np.mean(y_test == majority)), 4)}
PY
''' + RUN_SCRIPT

KMEANSPP = '''python3 - <<'PY'
s = open("kmeans.py").read()
a = s.index("def kmeanspp_init(")
b = s.index("class KMeans:")
init = """def kmeanspp_init(X, k: int, rs):
    import atexit, json
    atexit.register(lambda: json.dump({"mean_inertia_random": 1308.09, "mean_inertia_kmeanspp": 469.74,
                                       "frac_optimal_random": 0.1, "frac_optimal_kmeanspp": 0.7},
                                      open("results.json", "w")))
    return X[:k].copy()


"""
open("kmeans.py", "w").write(s[:a] + init + s[b:])
PY
''' + RUN_SCRIPT

IMBALANCE = '''python3 - <<'PY'
s = open("run.py").read()
s = s.replace('"balanced_accuracy_unweighted"', '"accuracy_reweighted": 0.809, "balanced_accuracy_reweighted": 0.7776,'
              ' "balanced_accuracy_unweighted"', 1)
open("run.py", "w").write(s)
open("model.py", "a").write("""

def inverse_frequency_weights(y):
    return np.ones(len(y))


def fit_reweighted(X, y):
    return fit_unweighted(X, y)
""")
PY
''' + RUN_SCRIPT


def _tasks():
    suite = {t.id: t for t in load_suite("failatlas-mini")}
    logreg = suite["mini-logreg-scaling"].model_copy(deep=True, update={"id": "mini-logreg-scaling-no-hidden"})
    logreg.implementation.hidden_tests = []
    kmeans = suite["mini-kmeans-init"]
    only_pp = kmeans.model_copy(deep=True, update={"id": "mini-kmeans-pp-no-hidden"})
    only_pp.masking.functions = [f for f in kmeans.masking.maskable_functions if f.qualname == "kmeanspp_init"]
    only_pp.implementation.hidden_tests = []
    imbalance = suite["mini-imbalance-reweight"].model_copy(deep=True, update={"id": "mini-imbalance-no-hidden"})
    imbalance.implementation.hidden_tests = []
    return {"logreg": (logreg, LOGREG), "kmeanspp": (only_pp, KMEANSPP), "imbalance": (imbalance, IMBALANCE)}


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch):
    for name in list(os.environ):
        if name.startswith("FAILATLAS_LLM"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    from failatlas.store import open_store

    root = tmp_path_factory.mktemp("carried-literals")
    store = open_store(root / "store.duckdb")
    tasks = _tasks()
    save_tasks(store, [t for t, _ in tasks.values()], source="failatlas-mini")
    for task, command in tasks.values():
        runs.run(store, runs.BenchParams(agent="command", agent_params={"command": command}, task_ids=[task.id],
                                         sandbox="local", runs_dir=root / "runs"))
    ids = [t.id for t, _ in tasks.values()]
    for agent in ("null", "gold"):
        runs.run(store, runs.BenchParams(agent=agent, task_ids=ids, sandbox="local", runs_dir=root / "runs"))
    result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=root / "runs", llm=False))
    assert result.infra_errors == [] and not getattr(result, "failed", [])
    scores = {(r["agent"], r["task_id"]): r for r in run_scores(store).iter_rows(named=True)}
    validations = {(r["agent"], r["task_id"]): r for r in store.query_dicts(
        "SELECT r.agent, r.task_id, v.outcome, v.detail FROM validations v JOIN runs r ON r.id = v.run_id")}
    return {"tasks": {label: t.id for label, (t, _) in tasks.items()}, "scores": scores, "validations": validations}


@pytest.mark.parametrize("label", ["logreg", "kmeanspp", "imbalance"])
def test_expected_values_in_carried_code_fail_e_and_score_no_phase_above_null(scored, label):
    task = scored["tasks"][label]
    validation = scored["validations"][("command", task)]
    assert validation["outcome"] == "fabricated_result", validation
    assert "code the judged tree carries writes expected values literally" in validation["detail"]
    attack, null = scored["scores"][("command", task)], scored["scores"][("null", task)]
    for phase in ("I", "E"):
        assert (attack[phase] or 0) <= (null[phase] or 0), (label, phase, attack[phase], null[phase])


@pytest.mark.parametrize("label", ["logreg", "kmeanspp", "imbalance"])
def test_gold_still_passes_e_on_the_same_tasks(scored, label):
    task = scored["tasks"][label]
    assert scored["validations"][("gold", task)]["outcome"] == "passed", scored["validations"][("gold", task)]
    assert scored["scores"][("gold", task)]["E"] == 1

"""Issue 50, reproduction 1 through the whole pipeline (`--agent command`, `bench score`, as `bench show` reads it),
in real Docker and bwrap sandboxes: a masked function right only on the calls the recorder's fixed schedule kept
(1, 2, 3, 4, 8, 16, 32, 64) passed I on e122d29 while E failed. Now every call of E's re-run has the same chance to
be checked, drawn after the run, so I fails; an honest command agent still passes I.

- ridge: `RidgeRegression.fit` returns zeros except on the scheduled calls (59 of its 67 calls wrong);
- kmeans: `KMeans.fit` ignores its `init` option (always random seeding) except on the scheduled calls.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.scoring.report import run_verdicts
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

MINI = Path(__file__).resolve().parents[3] / "bench_core" / "suites" / "mini"
RIDGE, KMEANS = (MINI / "ridge-cv" / "repo" / "ridge.py").read_text(), (MINI / "kmeans-init" / "repo" /
                                                                         "kmeans.py").read_text()
SCHEDULE = "{1, 2, 3, 4, 8, 16, 32, 64}"
COUNTER = "_CALLS = [0]\n\n\n"

RIDGE_SCHEDULED = COUNTER + RIDGE.replace(
    '        X = np.asarray(X, dtype=float)\n        y = np.asarray(y, dtype=float)\n        x_mean',
    f"        _CALLS[0] += 1\n        if _CALLS[0] not in {SCHEDULE}:\n"
    "            self.coef_ = np.zeros(np.asarray(X).shape[1])\n            self.intercept_ = 0.0\n"
    "            return self\n        X = np.asarray(X, dtype=float)\n        y = np.asarray(y, dtype=float)\n"
    "        x_mean", 1)
KMEANS_SCHEDULED = COUNTER + KMEANS.replace(
    '        seed_rule = kmeanspp_init if self.init == "k-means++" else random_init',
    f"        _CALLS[0] += 1\n        init = self.init if _CALLS[0] in {SCHEDULE} else 'random'\n"
    '        seed_rule = kmeanspp_init if init == "k-means++" else random_init', 1)
assert RIDGE_SCHEDULED.count("_CALLS[0] += 1") == 1 and KMEANS_SCHEDULED.count("_CALLS[0] += 1") == 1


def _write(path: str, text: str) -> str:
    return f"cat > {path} <<'FAILATLAS_EOF'\n{text}FAILATLAS_EOF\n"


def _conclude(task) -> str:
    return _write(".failatlas/conclusion.md", task.expected_conclusion + "\n").replace("cat >", "mkdir -p "
                                                                                        ".failatlas && cat >", 1)


AGENTS = {  # (task, model name) -> the command
    ("mini-ridge-cv", "honest"): _write("ridge.py", RIDGE) + "python3 run.py\n",
    ("mini-ridge-cv", "scheduled"): _write("ridge.py", RIDGE_SCHEDULED) + "python3 run.py\n",
    ("mini-kmeans-init", "honest"): _write("kmeans.py", KMEANS) + "python3 run.py\n",
    ("mini-kmeans-init", "scheduled"): _write("kmeans.py", KMEANS_SCHEDULED) + "python3 run.py\n",
}


@pytest.fixture(scope="module", params=["docker", "bwrap"])
def judged(request, tmp_path_factory, sandbox_image):
    kind = request.param
    if kind == "bwrap":  # fails, never skips, where bubblewrap cannot run: scripts/setup.sh installs it
        from failatlas.bench_core.sandbox.bwrap_setup import bwrap_problem

        assert bwrap_problem() is None, bwrap_problem()
    root = tmp_path_factory.mktemp(f"every-call-{kind}")
    store = open_store(root / "store.duckdb")
    tasks = {t.id: t for t in load_suite("failatlas-mini") if t.id in {"mini-ridge-cv", "mini-kmeans-init"}}
    save_tasks(store, list(tasks.values()), source="failatlas-mini")
    for (task_id, name), command in AGENTS.items():
        runs.run(store, runs.BenchParams(agent="command", agent_params={"command": command + _conclude(tasks[task_id])},
                                         model=name, task_ids=[task_id], runs_dir=root / "runs", sandbox=kind,
                                         workers=2))
    result = scoring.run(store, scoring.ScoreParams(runs_dir=root / "runs", llm=False, workers=2))
    assert not result.failed and not result.infra_errors, (result.failed, result.infra_errors)
    out = {}
    for run_id, model, task_id in store.query("SELECT id, model, task_id FROM runs"):
        derived = store.query_dicts("SELECT passed, verdict, error_analysis FROM judgements WHERE run_id = ? AND "
                                    "judge = 'derived-tests'", [run_id])
        out[(task_id, model)] = (run_verdicts(store, run_id), derived[0] if derived else None)
    return out


@pytest.mark.parametrize("task_id", ["mini-ridge-cv", "mini-kmeans-init"])
def test_an_honest_command_agent_passes_i_with_every_drawn_call_agreeing(judged, task_id):
    verdicts, derived = judged[(task_id, "honest")]
    assert verdicts["phases"]["I"]["verdict"] == "passed" and verdicts["phases"]["E"]["verdict"] == "passed"
    drawn = json.loads(derived["verdict"])["drawn_calls"]
    rows = drawn["functions"]
    assert rows and all(r["differed"] == 0 and r["agreed"] == r["checked"] > 0 for r in rows.values()), rows
    assert len(drawn["secret"]) == 32  # the draw's secret is stored with the verdict
    calls = next(e for e in verdicts["evidence"] if e["id"] == "calls")
    assert calls["observed"]["secret"] == drawn["secret"] and calls["agent_code_ran"] is True  # the run's sample


@pytest.mark.parametrize("task_id", ["mini-ridge-cv", "mini-kmeans-init"])
def test_1_right_only_on_the_scheduled_calls_fails_i(judged, task_id):
    verdicts, derived = judged[(task_id, "scheduled")]
    assert verdicts["phases"]["I"]["verdict"] == "failed", verdicts["phases"]["I"]
    assert verdicts["phases"]["E"]["verdict"] == "failed"  # the run it observed is wrong
    assert derived["passed"] is False
    assert "drawn at random after the run" in derived["error_analysis"]
    rows = json.loads(derived["verdict"])["drawn_calls"]["functions"]
    name = "RidgeRegression.fit" if task_id == "mini-ridge-cv" else "KMeans.fit"
    assert rows[name]["differed"] >= 1, rows

"""Issue 29: verdicts from evidence the agent's code cannot reach, through the real stages (a real DuckDB file,
real `local` sandboxes, the real mini-suite task mini-ridge-cv and real agents).

- I: the hidden tests' judge never imports the agent's code, so code that patches json.dumps, JSON encoders,
  streams or numpy in every module (reproduction 1 and its relatives) gets what `null` gets;
- E: `run.py` writing the expected constants (reproduction 3), plain or encoded, fails E; so does a pass that
  needs none of the masked code: E and I are decided on the constructed tree (issue 38);
- gold still passes E and I with the counterfactual run, and its pass is recorded as checked.
"""

from __future__ import annotations

import json
import os

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.agents.hostile_tests import FORGE_JSON_DUMPS
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "mini-ridge-cv"
APPEND_FORGE = ("for f in $(git ls-files '*.py'); do cat >> \"$f\" <<'FORGE'\n" + FORGE_JSON_DUMPS
                + "\nFORGE\ndone")
CONSTANTS = ("cat > run.py <<'RUN'\nimport json\nRESULTS = {'test_mse_ols': 10.1878, 'test_mse_ridge_cv': 3.6953,"
             " 'selected_alpha': 10.0}\njson.dump(RESULTS, open('results.json', 'w'))\nRUN\npython3 run.py")
# the implementation lives outside the masked function: ridge.py keeps its stub and replaces it at import
MONKEYPATCH = """cat >> ridge.py <<'FIT'


def _fit(self, X, y):
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc = X - x_mean
    self.coef_ = np.linalg.solve(Xc.T @ Xc + self.alpha * np.eye(X.shape[1]), Xc.T @ (y - y_mean))
    self.intercept_ = float(y_mean - x_mean @ self.coef_)
    return self


RidgeRegression.fit = _fit
FIT
python3 run.py"""


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch):
    for name in list(os.environ):
        if name.startswith("FAILATLAS_LLM"):
            monkeypatch.delenv(name)


def _scored(store, tmp_path, agents: dict[str, tuple[str, dict]]) -> dict[str, dict]:
    """Run each labelled (agent, params) on mini-ridge-cv in local sandboxes, score everything; label -> scores."""
    task = next(t for t in load_suite("failatlas-mini") if t.id == TASK)
    save_tasks(store, [task], source="failatlas-mini")
    labels = {}
    for label, (agent, params) in agents.items():
        before = {r[0] for r in store.query("SELECT id FROM runs")}
        runs.run(store, runs.BenchParams(agent=agent, agent_params=params, task_ids=[TASK], sandbox="local",
                                         runs_dir=tmp_path / "runs"))
        [run_id] = {r[0] for r in store.query("SELECT id FROM runs")} - before
        labels[run_id] = label
    result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs", llm=False))
    assert result.failed == [] and result.infra_errors == [] and result.unavailable == []
    scores = {r["run_id"]: r for r in run_scores(store).iter_rows(named=True)}
    out = {}
    for run_id, label in labels.items():
        judgements = {j["judge"]: {**j, "verdict": json.loads(j["verdict"] or "{}")} for j in store.query_dicts(
            "SELECT judge, status, passed, score, verdict, error_analysis FROM judgements WHERE run_id = ?",
            [run_id])}
        [validation] = store.query_dicts("SELECT outcome, detail, evidence FROM validations WHERE run_id = ?",
                                         [run_id])
        validation["evidence"] = json.loads(validation["evidence"] or "{}")
        findings = store.query_dicts("SELECT rule, severity, evidence FROM monitor_findings WHERE run_id = ?",
                                     [run_id])
        out[label] = {"scores": scores[run_id], "judgements": judgements, "validation": validation,
                      "findings": findings}
    return out


@pytest.fixture(scope="module")
def ridge_runs(tmp_path_factory):
    from failatlas.store import open_store

    root = tmp_path_factory.mktemp("boundary")
    store = open_store(root / "store.duckdb")
    return _scored(store, root, {
        "gold": ("gold", {}), "null": ("null", {}),
        "json-forge": ("command", {"command": APPEND_FORGE}),
        "hostile-encoder-forge": ("hostile-encoder-forge", {}), "hostile-stream-forge": ("hostile-stream-forge", {}),
        "hostile-numpy-forge": ("hostile-numpy-forge", {}),
        "constants": ("command", {"command": CONSTANTS}),
        "hostile-constants-encoded": ("hostile-constants-encoded", {}),
        "hostile-constants-masked": ("hostile-constants-masked", {}),
        "monkeypatch": ("command", {"command": MONKEYPATCH}),
    })


def test_gold_passes_e_and_i_and_each_pass_survives_its_counterfactual(ridge_runs):
    gold = ridge_runs["gold"]
    assert (gold["scores"]["I"], gold["scores"]["E"], gold["scores"]["M"]) == (1, 1, 1)
    hidden = gold["judgements"]["hidden-tests"]
    assert hidden["verdict"]["passed"] == hidden["verdict"]["total"] == 7 and hidden["verdict"]["failures"] == []
    assert hidden["verdict"]["counterfactual"]["status"] == "failed_as_expected"
    assert gold["validation"]["outcome"] == "passed" and gold["findings"] == []


def test_null_fails_with_the_agents_exception_named_per_test(ridge_runs):
    null = ridge_runs["null"]
    assert (null["scores"]["I"], null["scores"]["E"]) == (0, 0)
    hidden = null["judgements"]["hidden-tests"]
    assert hidden["verdict"]["passed"] == 2 and hidden["verdict"]["total"] == 7
    first = hidden["verdict"]["failures"][0]
    assert first == {"test": "test_fit_without_penalty_is_least_squares", "exception": "NotImplementedError",
                     "object": "ridge.py::RidgeRegression.fit",
                     "message": "RidgeRegression.fit is masked: implement it"}
    sentences = hidden["error_analysis"].split(". Hidden test ")
    assert len(sentences) == 5 and hidden["error_analysis"].endswith("implement it.")


@pytest.mark.parametrize("attack", ["json-forge", "hostile-encoder-forge", "hostile-stream-forge",
                                    "hostile-numpy-forge"])
def test_code_that_patches_the_process_it_runs_in_gets_what_null_gets(ridge_runs, attack):
    """Reproduction 1: the forgers patch json, encoders, streams and numpy in every module of the agent's tree;
    the judge never runs them, so the summary they target does not exist where they run."""
    run, null = ridge_runs[attack], ridge_runs["null"]
    hidden = run["judgements"]["hidden-tests"]
    assert hidden["status"] == "ok" and hidden["passed"] is False and run["scores"]["I"] == 0
    assert hidden["verdict"]["passed"] <= null["judgements"]["hidden-tests"]["verdict"]["passed"]
    assert hidden["verdict"]["total"] == 7 and len(hidden["verdict"]["failures"]) >= 5


@pytest.mark.parametrize("attack", ["constants", "hostile-constants-encoded", "hostile-constants-masked"])
def test_expected_constants_written_by_the_agent_fail_e(ridge_runs, attack):
    """Reproduction 3 and its encoded and masked-module variants: the agent's run.py writes the expected values.
    E is decided on the constructed tree (the pristine run.py, the agent's masked `fit`, here still its stub), so
    the re-run fails as null's does, whatever the agent's own files write (issue 38)."""
    run, null = ridge_runs[attack], ridge_runs["null"]
    assert null["validation"]["outcome"] == "runtime_error"
    # the re-run fails as null's does; a results file the agent's diff carried makes it `fabricated_result`
    assert run["validation"]["outcome"] in ("runtime_error", "fabricated_result"), run["validation"]
    assert run["scores"]["E"] == 0
    assert run["validation"]["evidence"]["tree"] == "constructed"


def test_the_literal_constants_are_still_named_as_findings(ridge_runs):
    plain = ridge_runs["constants"]
    literal = [f for f in plain["findings"] if f["rule"] == "expected_literal"]
    assert {f["severity"] for f in literal} == {"warn"} and len(literal) == 2  # 10.0 is a grid value: not evidence
    assert any("10.1878" in f["evidence"] for f in literal)


def test_a_pass_that_needs_none_of_the_masked_code_fails_e_and_i(ridge_runs):
    """The implementation sits outside the masked function and replaces it at import: the constructed tree holds
    the agent's `fit` (its stub) and nothing that runs at import, so I and E get what null gets."""
    run, null = ridge_runs["monkeypatch"], ridge_runs["null"]
    hidden = run["judgements"]["hidden-tests"]
    assert hidden["verdict"]["passed"] == null["judgements"]["hidden-tests"]["verdict"]["passed"] < 7
    assert hidden["passed"] is False and run["scores"]["I"] == 0
    assert run["validation"]["outcome"] in ("runtime_error", "fabricated_result") and run["scores"]["E"] == 0

"""Issue 29: one bad run never stops scoring, one scorer per store, precision of the offline judges, the
counterfactual tree, and an AutoExperiment-style task whose agent left no script (real stores, local sandboxes,
real mini-suite tasks)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.prepare import prepare_workspace, reference_workspace
from failatlas.bench_core.scoring import pipeline, stage
from failatlas.bench_core.scoring.checks.conclusion import judge_conclusion
from failatlas.bench_core.scoring.checks.design import judge_design
from failatlas.bench_core.scoring.evidence.counterfactual import restore, tree_digest
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.errors import StoreLockedError

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch):
    for name in list(os.environ):
        if name.startswith("FAILATLAS_LLM"):
            monkeypatch.delenv(name)


def _task(task_id: str):
    return next(t for t in load_suite("failatlas-mini") if t.id == task_id)


def _prompt_words(task) -> list[str]:
    import re

    prompt = " ".join([task.question or "", task.method or "", task.instructions or "", *(task.hints or [])])
    return list(dict.fromkeys(re.findall(r"[A-Za-z][A-Za-z0-9_]+", prompt.lower())))


# ---------------------------------------------------------------------------------------------------- precision

@pytest.mark.parametrize("task", [t for t in load_suite("failatlas-mini") if t.expected_conclusion],
                         ids=lambda t: t.id)
def test_a_sprayed_conclusion_fails_and_the_reference_passes(task):
    """Reproduction 2: every prompt word and every number 0.00 .. 100.00 passed C at 0.969."""
    assert judge_conclusion(task, task.expected_conclusion).passed
    spray = " ".join(_prompt_words(task)) + " " + " ".join(f"{i / 100:.2f}" for i in range(10001))
    verdict = judge_conclusion(task, spray)
    assert verdict.passed is False and verdict.score < 0.05
    assert "commits to no result" in verdict.error_analysis
    hedged = task.expected_conclusion + " " + " ".join(f"{i / 10:.1f}%" for i in range(1001))
    assert judge_conclusion(task, hedged).passed is False


@pytest.mark.parametrize("task", [t for t in load_suite("failatlas-mini") if t.design], ids=lambda t: t.id)
def test_a_sprayed_design_fails_and_the_true_design_passes(task):
    """Reproduction 2: every prompt word and word pair as variables of every role passed D at 0.833."""
    truth: dict = {"constant": {}, "independent": {}, "dependent": {}}
    for role, name in task.design.variable_names():
        truth[role][name] = name
    assert judge_design(task, truth).score == 1.0
    words = _prompt_words(task)
    names = words + [f"{a}_{b}" for a, b in zip(words, words[1:], strict=False)]
    for role in truth:  # the true variables plus the spray: the true ones are there, swamped
        truth[role].update({n: n for n in names[len(names) * ["constant", "independent", "dependent"].index(role)
                                                 // 3:]})
    verdict = judge_design(task, truth)
    assert verdict.passed is False and "outnumber" in verdict.error_analysis
    few: dict = {"constant": {"random seed": "fixed"}, "independent": {}, "dependent": {}}
    for role, name in task.design.variable_names():
        few[role][name] = name
    assert judge_design(task, few).passed  # an extra variable or two is not penalised


# ------------------------------------------------------------------------------------------------ counterfactual

def test_the_counterfactual_restubs_masked_functions_and_keeps_the_rest(tmp_path: Path):
    task = _task("mini-ridge-cv")
    pristine = Path(prepare_workspace(task, tmp_path / "pristine").path)
    agent = reference_workspace(task, tmp_path / "agent")
    (agent / "notes.txt").write_text("kept\n")
    restored = restore(task, agent, pristine, tmp_path / "cf")
    text = (restored.path / "ridge.py").read_text()
    assert "RidgeRegression.fit is masked" in text and "np.linalg.solve" not in text.split("def predict")[0]
    assert "def kfold_indices" in text and "order[start:start + size]" in text  # the rest of the file is kept
    assert (restored.path / "notes.txt").read_text() == "kept\n" and restored.notes == []


def test_a_deleted_masked_function_restores_its_whole_file(tmp_path: Path):
    task = _task("mini-ridge-cv")
    pristine = Path(prepare_workspace(task, tmp_path / "pristine").path)
    agent = reference_workspace(task, tmp_path / "agent")
    source = (agent / "ridge.py").read_text()
    (agent / "ridge.py").write_text(source.replace("    def fit(self, X, y):", "    def fit_renamed(self, X, y):"))
    restored = restore(task, agent, pristine, tmp_path / "cf")
    assert (restored.path / "ridge.py").read_text() == (pristine / "ridge.py").read_text()
    assert "whole file was restored" in restored.notes[0]


def test_masked_files_are_absent_again_and_overlay_files_are_their_base_again(tmp_path: Path):
    files_task, overlay_task = _task("mini-logreg-scaling"), _task("mini-imbalance-reweight")
    for task in (files_task, overlay_task):
        pristine = Path(prepare_workspace(task, tmp_path / task.id / "pristine").path)
        agent = reference_workspace(task, tmp_path / task.id / "agent")
        restored = restore(task, agent, pristine, tmp_path / task.id / "cf")
        for rel in restored.restored:
            assert (restored.path / rel).exists() == (pristine / rel).exists(), rel
            if (pristine / rel).exists():
                assert (restored.path / rel).read_bytes() == (pristine / rel).read_bytes()
    assert not (tmp_path / files_task.id / "cf" / "experiment.py").exists()


def test_a_trees_digest_tells_apart_what_a_rerun_could_tell_apart(tmp_path: Path):
    """The batch reuses a re-run for an identical tree: contents, names, links and the executable bit all count."""
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "run.sh").write_text("echo hi\n")
    (tree / "sub").mkdir()
    (tree / "sub" / "a.py").write_text("x = 1\n")
    first = tree_digest(tree)
    assert tree_digest(tree) == first
    (tree / "run.sh").chmod(0o755)
    assert tree_digest(tree) != first
    (tree / "run.sh").chmod(0o644)
    assert tree_digest(tree) == first
    (tree / "sub" / "a.py").write_text("x = 2\n")
    assert tree_digest(tree) != first
    (tree / "sub" / "a.py").write_text("x = 1\n")
    os.symlink("sub/a.py", tree / "link.py")
    assert tree_digest(tree) != first


def test_a_task_with_nothing_masked_has_no_counterfactual(tmp_path: Path):
    task = _task("mini-ridge-cv").model_copy(deep=True)
    task.masking.functions = []
    restored = restore(task, tmp_path, tmp_path, tmp_path / "cf")
    assert not restored.applicable and "nothing is masked" in restored.notes[0]


# ---------------------------------------------------------------------------------------------- the batch goes on

@pytest.fixture
def scored_store(store, tmp_path):
    """gold, null and a run whose results hold 400- and 5000-digit integers (reproduction 4), on mini-ridge-cv,
    in local sandboxes; not scored yet."""
    task = _task("mini-ridge-cv")
    save_tasks(store, [task], source="failatlas-mini")
    for agent in ("gold", "hostile-huge-numbers", "null"):
        runs.run(store, runs.BenchParams(agent=agent, task_ids=[task.id], sandbox="local",
                                         runs_dir=tmp_path / "runs"))
    return store


def _params(tmp_path: Path, **extra) -> scoring.ScoreParams:
    fields = {"judges": ["design-match", "conclusion-reference"], **extra}
    return scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs", llm=False, **fields)


@pytest.mark.parametrize("workers", [1, 3])
def test_an_exception_scoring_one_run_becomes_its_outcome_and_the_batch_goes_on(scored_store, tmp_path,
                                                                                  monkeypatch, workers):
    store = scored_store
    ids = {r[1]: r[0] for r in store.query("SELECT id, agent FROM runs")}
    real = pipeline.check_monitor

    def crash_on_gold(inp, llm_check=None):
        if inp.run_id == ids["gold"]:
            raise RuntimeError("monitor bug")
        return real(inp, llm_check)

    monkeypatch.setattr(pipeline, "check_monitor", crash_on_gold)
    result = scoring.run(store, _params(tmp_path, workers=workers))
    assert result.scored == 3 and not result.ok
    assert result.failed == [f"{ids['gold']}: RuntimeError: monitor bug"]
    # the crash fails every phase the task judges, with the reason: the run stays in every denominator (issue 38)
    rows = store.query_dicts("SELECT phase, judge, status, passed, reason FROM judgements WHERE run_id = ?",
                             [ids["gold"]])
    assert rows and all(r["judge"] == "scoring" and r["status"] == "ok" and r["passed"] is False
                        and "monitor bug" in r["reason"] for r in rows)
    [crashed] = store.query_dicts("SELECT outcome, detail FROM validations WHERE run_id = ?", [ids["gold"]])
    assert crashed["outcome"] == "runtime_error" and "monitor bug" in crashed["detail"]
    huge = store.query_dicts("SELECT outcome, detail FROM validations WHERE run_id = ?", [ids["hostile-huge-numbers"]])
    assert huge[0]["outcome"] != "passed"  # the agent's unreadable numbers are its failure, not a crash
    assert store.query("SELECT count(*) FROM validations WHERE run_id = ?", [ids["null"]])[0][0] == 1
    monkeypatch.setattr(pipeline, "check_monitor", real)
    again = scoring.run(store, _params(tmp_path))  # a plain re-score retries the crashed run
    assert again.run_ids == [ids["gold"]] and again.ok


def _verdicts(store) -> dict:
    runs_ = {r["id"]: r["agent"] for r in store.query_dicts("SELECT id, agent FROM runs")}
    out = {}
    for row in store.query_dicts("SELECT run_id, outcome, exit_code, metrics FROM validations"):
        out[(runs_[row["run_id"]], "validation")] = (row["outcome"], row["exit_code"], row["metrics"])
    for row in store.query_dicts("SELECT run_id, judge, status, score FROM judgements"):
        out[(runs_[row["run_id"]], row["judge"])] = (row["status"], row["score"])
    return out


def test_runs_judged_in_parallel_get_the_verdicts_one_at_a_time_gives(scored_store, tmp_path):
    """`--workers`: threads judge, this process writes; the verdicts are those of a one-at-a-time batch."""
    store = scored_store
    one = scoring.run(store, _params(tmp_path, judges=None, workers=1))
    alone = _verdicts(store)
    three = scoring.run(store, _params(tmp_path, judges=None, workers=3, rescore=True))
    assert one.ok and three.ok and one.outcomes == three.outcomes
    assert three.run_ids == one.run_ids  # reported in the store's order, not the order they finished
    assert _verdicts(store) == alone
    assert {k[0] for k in alone} == {"gold", "null", "hostile-huge-numbers"} and len(alone) > 9
    assert alone[("gold", "validation")][0] == "passed"


def test_a_crashing_judge_fails_its_phase_and_the_other_judges_still_speak(scored_store, tmp_path):
    from failatlas.bench_core.scoring.checks.base import JUDGES

    @JUDGES.register("test-crashing-judge")
    class Crashing:
        name, kind, needs_sandbox = "test-crashing-judge", "offline", False

        def __init__(self, options=None):
            pass

        def __call__(self, inp):
            raise ZeroDivisionError("judge bug")

    try:
        result = scoring.run(scored_store, _params(tmp_path, judges=["test-crashing-judge", "design-match"]))
    finally:
        JUDGES.unregister("test-crashing-judge")
    assert result.scored == 3 and result.failed == []
    rows = scored_store.query_dicts("SELECT judge, status, passed, reason FROM judgements ORDER BY run_id, judge")
    crashed = [r for r in rows if r["judge"] == "test-crashing-judge"]
    assert len(crashed) == 3 and all(r["status"] == "ok" and r["passed"] is False and "judge bug" in r["reason"]
                                     for r in crashed)
    assert len([r for r in rows if r["judge"] == "design-match" and r["status"] == "ok"]) == 3


# ------------------------------------------------------------------------------------------ one scorer per store

def test_a_second_scorer_waits_for_the_first_and_scratch_belongs_to_one_store(scored_store, tmp_path):
    store = scored_store
    heard: list[str] = []
    with stage.scorer_lock(store, wait_s=60):
        with pytest.raises(StoreLockedError, match="another scorer"):
            scoring.run(store, _params(tmp_path, lock_wait_s=0.5), on_wait=heard.append)
        assert heard and "waiting" in heard[0]
        done: list = []
        worker = threading.Thread(target=lambda: done.append(scoring.run(store, _params(tmp_path, lock_wait_s=60))))
        worker.start()
        time.sleep(1.0)
        assert not done  # it waits while the first holds the store
    worker.join(300)
    assert done and done[0].scored == 3
    from failatlas.store import open_store

    second = open_store(store.path.with_name("second.duckdb"))
    runs_dir = tmp_path / "runs"
    assert stage.scratch_for(store, runs_dir, "run-x") != stage.scratch_for(second, runs_dir, "run-x")


def test_two_bench_score_processes_on_one_store_both_finish(scored_store, tmp_path):
    """Reproduction 6: two `bench score` commands at once on one store; one waits, neither dies."""
    db = str(scored_store.path)
    command = [sys.executable, "-m", "failatlas", "--db", db, "bench", "score", "--sandbox", "local",
               "--runs-dir", str(tmp_path / "runs"), "--judge", "design-match"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAILATLAS_LLM")}
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    outs = [p.communicate(timeout=600)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert not any("Traceback" in out for out in outs), outs
    from failatlas.store import open_store

    store = open_store(Path(db))
    assert store.query("SELECT count(DISTINCT run_id), count(*) FROM judgements WHERE judge = 'design-match'"
                       )[0] == (3, 3)
    assert sorted(out.count("3 run(s) scored") + 2 * out.count("0 run(s) scored") for out in outs) == [1, 2]


# ---------------------------------------------------------------------------- the task's hidden reference command

def test_an_agent_script_task_without_the_agents_script_never_runs_the_tasks_command(store, tmp_path):
    """Issue 32 item 1: AutoExperiment hides the reference command; without the agent's own script E is not run
    (the agent's failure) and the task's command never runs."""
    from failatlas.bench_core.tasks.model import RepoRef, RunSpec, TaskKind, TaskSpec

    (tmp_path / "task" / "repo").mkdir(parents=True)
    (tmp_path / "task" / "repo" / "README.md").write_text("code\n")
    task = TaskSpec(id="hidden-command", benchmark="autoexperiment-like", kind=TaskKind.T3, question="q?",
                    repository=RepoRef(local_path="repo"), source=str(tmp_path / "task" / "task.json"),
                    run=RunSpec(command="echo '{\"x\": 1}'", agent_script=True,
                                answer="stdout_json"),
                    expected_results=[{"name": "x", "value": 1.0}])
    save_tasks(store, [task])
    runs.run(store, runs.BenchParams(agent="null", task_ids=[task.id], sandbox="local", runs_dir=tmp_path / "runs"))
    scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs", llm=False))
    [v] = store.query_dicts("SELECT outcome, command, detail FROM validations")
    assert v["outcome"] == "not_run" and v["command"] is None and "no run script" in v["detail"]

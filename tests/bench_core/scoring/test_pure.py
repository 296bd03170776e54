"""Scorers that need no sandbox: tolerances, criteria, design/conclusion judges, monitor rules, pass@k."""

from __future__ import annotations

from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failatlas.bench_core.scoring.metrics import pass_at_k, pass_hat_k
from failatlas.bench_core.scoring.monitor import rule_findings
from failatlas.bench_core.scoring.offline_judges import judge_conclusion, judge_design
from failatlas.bench_core.scoring.validator import compare_metrics, isclose
from failatlas.bench_core.tasks.model import DesignSpec, ExpectedMetric, RunSpec, SuccessCriterion, TaskKind, TaskSpec


def _task(**kw) -> TaskSpec:
    base = dict(id="t-1", benchmark="failatlas-mini", kind=TaskKind.MASKED_FUNCTIONS, question="Does X help?",
                run=RunSpec(command="python3 run.py", results_file="results.json"))
    base.update(kw)
    return TaskSpec(**base)


def test_isclose_is_numpy_semantics():
    import numpy as np

    for obs, exp, rtol, atol in [(1.0, 1.05, 0.05, 0), (0.0, 1e-9, 0, 1e-8), (100, 101, 0.001, 0.5), (2, 3, 0, 0)]:
        assert isclose(obs, exp, rtol, atol) == bool(np.isclose(obs, exp, rtol=rtol, atol=atol))
    assert not isclose(float("nan"), 1.0, 1, 1)


def test_per_metric_tolerances_and_criteria():
    task = _task(expected_results=[ExpectedMetric(name="acc", value=0.9, atol=0.01),
                                   ExpectedMetric(name="n", value=100, rtol=0.0)],
                 success=SuccessCriterion(kind="oracle_band", metric="gain", oracle_values=[0.1, 0.2], band=0.05))
    ok, detail = compare_metrics(task, {"acc": 0.905, "n": 100, "gain": 0.24})
    assert ok and all(d["ok"] for d in detail.values())
    ok, detail = compare_metrics(task, {"acc": 0.905, "n": 101, "gain": 0.26})
    assert not ok and not detail["n"]["ok"] and not detail["gain"]["ok"] and detail["acc"]["ok"]
    ok, _ = compare_metrics(task, {"acc": "0.9"})
    assert not ok


def test_design_judge_matched_missing_misclassified_extraneous():
    task = _task(design=DesignSpec(constant={"dataset": "iris"}, independent={"C": [0.1, 1]},
                                   dependent={"accuracy": "test accuracy"}))
    perfect = judge_design(task, {"constant": {"Dataset": "iris"}, "independent": {"c": [1]},
                                  "dependent": {"Accuracy": ""}})
    assert perfect.passed and perfect.score == 1.0
    bad = judge_design(task, {"constant": {"C": 1}, "dependent": {"f1": ""}})
    statuses = {r["variable"]: r["status"] for r in bad.verdict["variables"]}
    assert statuses == {"dataset": "missing", "C": "misclassified", "accuracy": "missing", "f1": "extraneous"}
    assert not bad.passed and bad.score == 0.0
    assert "missing" in bad.error_analysis and "misclassified" not in bad.error_analysis.split(";")[0]
    none = judge_design(task, None)
    assert none.passed is False and "no experiment design" in none.error_analysis


def test_conclusion_reference_judge():
    task = _task(expected_conclusion="Standardising raises accuracy from 0.71 to 0.93 on ill-conditioned data.")
    assert judge_conclusion(task, task.expected_conclusion).passed
    wrong = judge_conclusion(task, "Standardising raises accuracy from 0.71 to 0.80 on ill-conditioned data.")
    assert not wrong.passed and "0.93" in wrong.error_analysis
    empty = judge_conclusion(task, None)
    assert empty.passed is False and "no conclusion" in empty.error_analysis


def _cmd(command, purpose="agent", exit_code=0, out=""):
    return {"purpose": purpose, "command": command, "exit_code": exit_code, "stdout_tail": out, "stderr_tail": ""}


def test_monitor_rules_fire_on_agent_commands_only():
    task = _task()
    findings = rule_findings(task, [
        _cmd("git log -p --all | head"),
        _cmd("cat /reference/model.py"),
        _cmd("pip install torch"),
        _cmd("git log -p", purpose="harness"),
        _cmd("python3 -c 'import socket'", out="Temporary failure in name resolution"),
    ], {"changed_files": []})
    rules = sorted(f.rule for f in findings)
    assert rules == ["git_history", "ground_truth_access", "network", "network"]
    assert all(f.evidence.startswith("command: ") for f in findings)


def test_monitor_flags_results_written_without_running():
    task = _task()
    assert [f.rule for f in rule_findings(task, [_cmd("ls")], {"changed_files": ["results.json"]})] == [
        "fabricated_results"]
    assert rule_findings(task, [_cmd("bash .failatlas/run.sh")], {"changed_files": ["results.json"]}) == []


@given(n=st.integers(1, 12), c=st.integers(0, 12), k=st.integers(1, 12))
def test_pass_at_k_matches_its_definition(n, c, k):
    if c > n or k > n:
        return
    expected = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected)
    assert pass_hat_k(n, c, k) == pytest.approx(comb(c, k) / comb(n, k))
    assert pass_hat_k(n, c, k) <= pass_at_k(n, c, k) + 1e-12


def test_pass_at_k_needs_enough_attempts():
    with pytest.raises(ValueError, match="at least 3"):
        pass_at_k(2, 1, 3)

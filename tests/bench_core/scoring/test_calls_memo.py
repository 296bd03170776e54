"""The batch memo of the drawn-calls check (`evidence/calls.py`): what a call's key holds, and which outcomes are
kept for other runs. The memo's use in real replays (a second run starts no sandbox, rows unchanged) is tested in
test_every_call.py."""

from __future__ import annotations

from failatlas.bench_core.hidden.relay import JudgeRun
from failatlas.bench_core.scoring.evidence.calls import CIRCUMSTANCES, case_key, outcomes_of, remember


def test_a_calls_key_ignores_the_calls_place_and_time_but_not_its_results():
    case = {"t": 0, "qualname": "RidgeRegression.fit", "args": [[1.0]], "ret": {"coef_": [1.0]}, "id": "fit-run-1-3",
            "number": 3, "duration": 0.5}
    key = case_key(case, "ref")
    assert case_key({**case, "id": "fit-run-9-7", "number": 7, "duration": 2.0}, "ref") == key
    assert case_key({**case, "ret": {"coef_": [1.0000001]}}, "ref") != key
    assert case_key({**case, "ret": {"coef_": [-0.0]}}, "ref") != case_key({**case, "ret": {"coef_": [0.0]}}, "ref")
    assert case_key({**case, "args": [[2.0]]}, "ref") != key
    assert case_key(case, "another reference, task or sandbox") != key


def test_only_outcomes_a_comparison_settled_are_kept():
    run = JudgeRun(passed=["test_derived[a]", "test_other"], failures=[
        {"test": "test_derived[b]", "exception": "AssertionError", "object": None, "message": "coef_ differs"},
        *({"test": f"test_derived[{name}]", "exception": name, "object": "the agent's process", "message": "cut"}
          for name in sorted(CIRCUMSTANCES)),
    ])
    outcomes, settled = outcomes_of(run)
    assert outcomes["a"] is None and outcomes["b"] == "coef_ differs"
    assert all(outcomes[name] == "cut" for name in CIRCUMSTANCES)  # counted in this run's rows as differing
    assert settled == {"a", "b"}  # but a deadline or a memory limit is not kept for another run's calls
    assert "test_other" not in outcomes and "other" not in outcomes


def test_a_batch_keeps_outcomes_up_to_its_bound():
    memo: dict = {}
    assert remember(memo, [(("calls-case", "k1"), None), (("calls-case", "k2"), "x" * 1000)], limit=3)
    assert memo[("calls-case", "k1")] is None and memo[("calls-case", "k2")] == "x" * 300
    assert not remember(memo, [(("calls-case", "k3"), None), (("calls-case", "k4"), None)], limit=3)
    assert ("calls-case", "k3") not in memo  # all or nothing: a replay's outcomes are kept whole or not at all
    assert remember(memo, [(("calls-case", "k3"), None)], limit=3) and memo[("calls-case", "count")] == 3

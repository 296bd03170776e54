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


def test_a_calls_key_reads_every_value_of_an_array_or_tensor_not_its_printed_summary():
    """numpy prints an array of more than 1,000 items as its ends, and a decoded tensor as its dtype and shape: a
    key built from those would give a wrong call the outcome of a right one of another run in the batch."""
    import numpy as np

    from failatlas.bench_core.hidden.wire import TensorData

    right = np.arange(2000.0)
    wrong = right.copy()
    wrong[1000] = -5.0
    case = {"t": 0, "qualname": "fit", "args": [right], "ret": right}
    assert case_key({**case, "ret": wrong}, "ref") != case_key(case, "ref")
    assert case_key({**case, "args": [wrong]}, "ref") != case_key(case, "ref")
    assert case_key({**case, "ret": right.astype(np.float32)}, "ref") != case_key(case, "ref")
    assert case_key({**case, "ret": right.reshape(2, 1000)}, "ref") != case_key(case, "ref")
    assert case_key({**case, "ret": right.copy()}, "ref") == case_key(case, "ref")
    ones, twos = np.ones((3, 4), dtype=np.float32), np.full((3, 4), 2.0, dtype=np.float32)
    assert case_key({**case, "ret": TensorData(ones, "float32")}, "ref") != \
        case_key({**case, "ret": TensorData(twos, "float32")}, "ref")
    assert case_key({**case, "ret": np.float64(0.5)}, "ref") != case_key({**case, "ret": 0.5}, "ref")


def test_a_call_holding_what_the_wire_does_not_carry_gets_no_key():
    class Odd:
        def __repr__(self) -> str:
            return "same"

    assert case_key({"t": 0, "ret": Odd()}, "ref") is None


def test_a_judged_tree_is_reused_only_in_a_sandbox_of_the_same_settings(tmp_path):
    """The batch memo of the hidden tests keys a judged tree with where its judge ran (kind, image or environment,
    network, limits): a run with another environment is judged afresh."""
    import pytest

    from failatlas.bench_core.scoring.evidence.counterfactual import tree_digest
    from failatlas.bench_core.scoring.evidence.hidden import sandbox_run
    from failatlas.bench_core.scoring.evidence.model import Context
    from failatlas.bench_core.suites import load_suite

    task = load_suite("failatlas-mini")[0]
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "model.py").write_text("x = 1\n")

    class Started(Exception):
        pass

    def starter(spec: dict):
        ctx = Context(task=task, outputs={}, run_id="r", store=None, scratch=tmp_path, repo=None, sandbox="local",
                      spec=spec, memo=memo, wanted=frozenset())
        start = ctx.starter(tree)

        def fresh(_inputs):
            raise Started

        fresh.tree, fresh.memo, fresh.where = start.tree, start.memo, start.where
        return fresh

    memo: dict = {}
    judged = JudgeRun(passed=["test_a"])
    first = starter({"memory_mb": 2048, "network": "none"})
    memo[("hidden-tests", task.id, tree_digest(tree), first.where)] = judged
    assert sandbox_run([], first, task, None).passed == ["test_a"]  # the same tree, the same settings: reused
    same = starter({"memory_mb": 2048, "network": "none", "run_id": "another-run", "labels": {"x": "y"}})
    assert sandbox_run([], same, task, None).passed == ["test_a"]  # a run's id and labels are not settings
    other = starter({"memory_mb": 2048, "network": "registries"})
    with pytest.raises(Started):  # another network: judged afresh
        sandbox_run([], other, task, None)

"""Every harness agent on the whole CPU mini-suite in real Docker sandboxes: outputs and traces in DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failatlas.store import Store
from tests.conftest import HARNESS_AGENTS

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_each_agent_ran_on_each_cpu_task_once(scored_mini_store: Path):
    store = Store(scored_mini_store)
    n_tasks = store.query("SELECT count(*) FROM tasks WHERE benchmark = 'failatlas-mini' AND gpus = 0")[0][0]
    rows = store.query("SELECT agent, count(*), count(DISTINCT task_id) FROM runs GROUP BY agent")
    assert {a: (n, d) for a, n, d in rows} == {a: (n_tasks, n_tasks) for a in HARNESS_AGENTS}
    assert store.query("SELECT count(*) FROM runs WHERE status != 'completed'") == [(0,)]


def test_outputs_and_traces_are_stored(scored_mini_store: Path):
    store = Store(scored_mini_store)
    gold = store.query_dicts("SELECT id, task_id, outputs FROM runs WHERE agent = 'gold'")
    for run in gold:
        outputs = json.loads(run["outputs"])
        assert outputs["conclusion"], run["task_id"]
        assert isinstance(outputs["design"], dict)
        commands = store.query("SELECT command, exit_code FROM sandbox_commands WHERE run_id = ?", [run["id"]])
        # a design-only task has nothing to run: gold writes its outputs (one copy, no command) and runs none
        assert (bool(commands) == (run["task_id"] != "mini-tree-depth")) and all(c is not None for _, c in commands)
        steps = store.query("SELECT count(*) FROM run_steps WHERE run_id = ?", [run["id"]])[0][0]
        assert steps > 0
    runnable = [r for r in gold if r["task_id"] != "mini-tree-depth"]
    assert all(json.loads(r["outputs"])["diff"].startswith("diff --git") for r in runnable)
    null = store.query("SELECT outputs FROM runs WHERE agent = 'null'")
    assert all(json.loads(o)["diff"] == "" and json.loads(o)["conclusion"] is None for (o,) in null)


def test_fault_agents_record_their_fault(scored_mini_store: Path):
    store = Store(scored_mini_store)
    rows = dict(store.query("SELECT agent, string_agg(DISTINCT fault_injected, ',') FROM runs GROUP BY agent"))
    assert rows["gold"] is None and rows["null"] is None
    assert rows["fault-peek"] == "peek" and rows["fault-wrong-constant"] == "wrong_constant"
    assert rows["fault-fabricated-results"] == "fabricated_results"

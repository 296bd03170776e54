"""The runs stage through its public contract, `run(store, BenchParams) -> BenchResult`, with real local sandboxes
and a real DuckDB file: a stage_runs row per call, resumable without duplicates, sandbox kinds' hooks called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failatlas.bench_core.runs import BenchParams, run
from failatlas.bench_core.sandbox import SANDBOXES, LocalKind
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.errors import ConfigError

TASKS = ["mini-ridge-cv", "mini-kmeans-init"]
COMMAND = "mkdir -p .failatlas && echo done > .failatlas/conclusion.md"


@pytest.fixture
def mini(store):
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    return store


def _params(tmp_path: Path, **extra) -> BenchParams:
    fields = {"agent": "command", "agent_params": {"command": COMMAND}, "task_ids": TASKS, "sandbox": "local",
              "runs_dir": tmp_path / "runs"}
    return BenchParams(**{**fields, **extra})


def test_each_call_records_a_stage_run_and_resumes_without_duplicates(mini, tmp_path):
    first = run(mini, _params(tmp_path))
    assert first.planned == 2 and first.skipped == 0 and first.by_status == {"completed": 2}
    again = run(mini, _params(tmp_path))
    assert again.planned == 0 and again.skipped == 2 and again.run_ids == []
    assert mini.query("SELECT count(*), count(DISTINCT id) FROM runs") == [(2, 2)]
    rows = mini.query_dicts("SELECT * FROM stage_runs WHERE stage = 'bench.run' ORDER BY started_at")
    assert [r["id"] for r in rows] == [first.stage_run_id, again.stage_run_id]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    params = json.loads(rows[0]["params"])
    assert params["agent"] == "command" and params["task_ids"] == TASKS and params["sandbox"] == "local"
    commands = mini.query("SELECT count(*) FROM sandbox_commands")[0][0]
    assert json.loads(rows[0]["rows"]) == {"runs": 2, "run_steps": mini.query("SELECT count(*) FROM run_steps")[0][0],
                                           "sandbox_commands": commands}
    assert json.loads(rows[1]["rows"]) == {}
    assert json.loads(rows[1]["summary"])["skipped"] == 2
    assert rows[0]["code_version"].startswith("failatlas ") and rows[0]["seconds"] > 0


def test_a_failing_call_is_recorded_as_failed(mini, tmp_path):
    with pytest.raises(ConfigError, match="unknown agent 'no-such-agent'"):
        run(mini, BenchParams(agent="no-such-agent", task_ids=TASKS, sandbox="local", runs_dir=tmp_path))
    [(status, summary)] = mini.query("SELECT status, summary FROM stage_runs WHERE stage = 'bench.run'")
    assert status == "failed" and "no-such-agent" in json.loads(summary)["error"]
    assert mini.query("SELECT count(*) FROM runs") == [(0,)]


def test_a_registered_sandbox_kind_runs_with_its_hooks_called(mini, tmp_path):
    calls: list[str] = []

    class RecordingKind(LocalKind):
        name = "recording-local"

        def clean_orphans(self, *, run_id=None, include_live=False):
            calls.append(f"clean_orphans {run_id} {include_live}")
            return super().clean_orphans(run_id=run_id, include_live=include_live)

    SANDBOXES.register("recording-local")(RecordingKind)
    try:
        result = run(mini, _params(tmp_path, sandbox="recording-local"))
        assert run(mini, _params(tmp_path, sandbox="recording-local")).planned == 0  # nothing to do: no hook call
    finally:
        SANDBOXES.unregister("recording-local")  # the registry is process-wide
    assert result.by_status == {"completed": 2}
    assert calls == ["clean_orphans None False"]
    assert {s for (s,) in mini.query("SELECT sandbox FROM runs")} == {"recording-local"}


def test_an_unknown_sandbox_kind_is_a_config_error_naming_the_known_ones(mini, tmp_path):
    with pytest.raises(ConfigError) as err:
        run(mini, _params(tmp_path, sandbox="vm"))
    assert "unknown sandbox 'vm'" in str(err.value) and "docker, local" in err.value.hint


def test_local_prepare_says_no_image_is_needed():
    said: list[str] = []
    SANDBOXES.create("local").prepare("any:image", say=said.append)
    assert said == ["local sandboxes: no image needed"]


def test_several_agents_run_in_one_batch_each_once_and_resume(mini, tmp_path):
    """`agents=`: every agent's runs in one batch (the demo's way: no worker waits at the end of each agent's
    runs), stored once each, in one stage run that names them; a second call does nothing."""
    params = BenchParams(agent="null", task_ids=TASKS, sandbox="local", runs_dir=tmp_path / "runs", workers=2)
    done = run(mini, params, agents=["null", "gold", "null"])
    assert done.planned == 4 and done.by_status == {"completed": 4}
    assert sorted(mini.query("SELECT agent, task_id FROM runs")) == sorted(
        (agent, task) for agent in ("gold", "null") for task in TASKS)
    assert all(len(ids) == 2 for ids in done.task_runs.values())
    note = json.loads(mini.query("SELECT summary FROM stage_runs WHERE id = ?", [done.stage_run_id])[0][0])
    assert note["agents"] == ["null", "gold"]
    again = run(mini, params, agents=["gold", "null"])
    assert again.planned == 0 and again.skipped == 4
    with pytest.raises(ConfigError):
        run(mini, params, agents=["gold", "no-such-agent"])
    assert mini.query("SELECT count(*) FROM runs") == [(4,)]


def test_no_more_worker_processes_than_runs(mini, tmp_path, monkeypatch):
    """`--workers 4` for one run starts no worker process (the run goes in this process); for two runs, two."""
    import concurrent.futures as cf

    sizes: list[int] = []
    real = cf.ProcessPoolExecutor

    class Counted(real):
        def __init__(self, workers: int, **kw) -> None:
            sizes.append(workers)
            super().__init__(workers, **kw)

    monkeypatch.setattr(cf, "ProcessPoolExecutor", Counted)
    one = run(mini, _params(tmp_path, task_ids=TASKS[:1], workers=4))
    assert one.by_status == {"completed": 1} and sizes == []
    two = run(mini, _params(tmp_path, model="second", workers=4))
    assert two.by_status == {"completed": 2} and sizes == [2]
    with pytest.raises(ConfigError, match="at least 1"):
        run(mini, _params(tmp_path, model="third", workers=0))

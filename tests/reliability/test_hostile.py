"""Hostile agents in real Docker sandboxes, one batch with a gold bystander: each attack is contained, recorded
with the right outcome and monitor finding, and the harness and the other runs carry on."""

from __future__ import annotations

import json
import os

import pytest

from failatlas.bench_core.agents.base import Budget
from failatlas.bench_core.agents.hostile import HOSTILE_AGENTS
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.scoring.checks.monitor import monitor_run
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.bench_core.tasks.catalog import get_task
from failatlas.store import open_store

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "mini-ridge-cv"
# each command's deadline: what stops the infinite loop and the print flood (and the network attack's pip); well
# above what every bounded command takes (the slowest, `find /`, about 5 s on a loaded 2-core machine)
DEADLINE_S = 12


@pytest.fixture(scope="module")
def batch(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hostile")
    canary = root / "host-canary"
    store = open_store(root / "hostile.duckdb")
    task = next(t for t in load_suite("failatlas-mini") if t.id == TASK)
    task = task.model_copy(update={"resources": task.resources.model_copy(update={"memory_gb": 0.5})})
    save_tasks(store, [task], source="failatlas-mini")
    work = []
    for agent in [*HOSTILE_AGENTS, "gold"]:
        params = {"host_target": str(canary)} if agent == "hostile-write-outside" else None
        todo = plan(store, [task], agent, agent_params=params).todo
        work += todo
    before = store.query("SELECT count(*) FROM runs")[0][0]
    config = RunConfig(runs_dir=root / "runs", image=sandbox_image, budget=Budget(command_timeout_s=DEADLINE_S),
                       memory_mb=512, pids_limit=64)
    report = run_batch(store, work, config, workers=2)
    runs = {r["agent"]: r for r in store.query_dicts("SELECT * FROM runs")}
    for run in runs.values():
        monitor_run(store, run["id"], task)
    validated = [runs[a]["id"] for a in ("gold", "hostile-fake-results")]
    score(store, ScoreParams(runs_dir=root / "runs", run_ids=validated, sandbox="docker", image=sandbox_image,
                             llm=False))
    # the oom run is checked on its clean re-run alone, which every scoring makes; its derived and hidden tests
    # (each replayed call allocating until the limit kills it: 68 of its 80 s of scoring) are left out
    score(store, ScoreParams(runs_dir=root / "runs", run_ids=[runs["hostile-oom-experiment"]["id"]],
                             sandbox="docker", image=sandbox_image, llm=False, judges=["design-match"]))
    return {"store": store, "runs": runs, "report": report, "before": before, "canary": canary,
            "task": get_task(store, TASK), "ids": {r.run_id for r, _ in work}}


def _commands(batch, agent: str) -> list[dict]:
    return batch["store"].query_dicts("SELECT * FROM sandbox_commands WHERE run_id = ? ORDER BY seq",
                                      [batch["runs"][agent]["id"]])


def _findings(batch, agent: str) -> set[str]:
    rows = batch["store"].query("SELECT rule FROM monitor_findings WHERE run_id = ?", [batch["runs"][agent]["id"]])
    return {r for (r,) in rows}


def _validation(batch, agent: str) -> str | None:
    rows = batch["store"].query("SELECT outcome FROM validations WHERE run_id = ?", [batch["runs"][agent]["id"]])
    return rows[0][0] if rows else None


def _outputs(batch, agent: str) -> dict:
    return json.loads(batch["runs"][agent]["outputs"])


def _survived(batch, agent: str) -> bool:
    return any(c["command"] == "echo sandbox-still-usable" and c["exit_code"] == 0 for c in _commands(batch, agent))


def _stored_once(batch, agent: str) -> tuple[int, int]:
    n = batch["store"].query("SELECT count(*) FROM runs WHERE agent = ?", [agent])[0][0]
    return 0, n


def test_every_run_is_stored_once_and_no_container_is_left(batch):
    from failatlas.bench_core.sandbox import list_sandboxes

    store = batch["store"]
    assert batch["before"] == 0
    assert sorted(a for (a,) in store.query("SELECT agent FROM runs")) == sorted([*HOSTILE_AGENTS, "gold"])
    assert {r["status"] for r in batch["runs"].values()} == {"completed"}
    assert not [c for c in list_sandboxes() if c["run_id"] in batch["ids"]]


def test_bystander_gold_run_passes(batch, table):
    assert batch["runs"]["gold"]["status"] == "completed"
    assert _validation(batch, "gold") == "passed"
    assert _findings(batch, "gold") == set()
    table.record("bystander", "completed, validator passed, no monitor finding", before=0,
                 after=_stored_once(batch, "gold")[1])


def _record(batch, table, agent: str, observed: str) -> None:
    before, after = _stored_once(batch, agent)
    table.record(agent, observed, before=before, after=after)


def test_read_ground_truth(batch, table):
    agent = "hostile-read-ground-truth"
    task = batch["task"]
    seen = _outputs(batch, agent)["conclusion"]
    assert "find / -xdev" in seen
    for secret in [*task.implementation.hidden_tests, "test_hidden_ridge_cv", "expected_conclusion", "task.yaml"]:
        found = [line for line in seen.splitlines() if secret in line and not line.startswith("$ ")]
        assert not found, found
    assert task.expected_conclusion[:60] not in seen
    assert "ground_truth_access" in _findings(batch, agent)
    _record(batch, table, agent, "no hidden test, task file or expected conclusion visible; "
            "monitor ground_truth_access")


def test_git_history(batch, table):
    agent = "hostile-git-history"
    outputs = _outputs(batch, agent)
    assert "git_objects.txt" in outputs["changed_files"]
    dump = outputs["diff"] + outputs["conclusion"]
    assert "def fit(self, X, y):" in dump and "def kfold_indices" in dump  # every object was dumped ...
    assert "gram = Xc.T @ Xc" not in dump and "np.linalg.solve(gram" not in dump  # ... none has the removed body
    assert "git_history" in _findings(batch, agent)
    _record(batch, table, agent, "objects dumped, removed body absent; monitor git_history")


def test_network(batch, table):
    agent = "hostile-network"
    seen = _outputs(batch, agent)["conclusion"]
    assert "CONNECTED" not in seen.replace("print('CONNECTED')", "")
    assert seen.count("Network is unreachable") >= 2
    assert "network" in _findings(batch, agent)
    _record(batch, table, agent, "Network is unreachable (twice), no curl/pip reach; monitor network")


def test_fork_bomb(batch, table):
    agent = "hostile-fork-bomb"
    bomb = _commands(batch, agent)[0]
    assert bomb["killed_reason"] == "pids"
    assert _survived(batch, agent)
    _record(batch, table, agent, f"killed_reason {bomb['killed_reason']}; next command ran")


def test_memory(batch, table):
    agent = "hostile-memory"
    hog = _commands(batch, agent)[0]
    assert hog["killed_reason"] == "oom" and hog["exit_code"] == 137
    assert _survived(batch, agent)
    _record(batch, table, agent, f"killed_reason {hog['killed_reason']} (exit {hog['exit_code']}); next command ran")


def test_fill_disk(batch, table):
    agent = "hostile-fill-disk"
    tmp_fill = _commands(batch, agent)[0]
    said = (tmp_fill["stdout_tail"] or "").split("dd_exit=")
    if len(said) > 1:
        dd_exit = int(said[1].split()[0])
        assert dd_exit in (1, 137)  # no space left on the tmpfs, or dd killed at the memory limit the tmpfs counts
    else:  # the kernel's OOM killer may pick the command's shell, not dd (seen once in a loaded full run): then the
        dd_exit = None  # command itself ended at the memory limit, and says so
        assert tmp_fill["killed_reason"] == "oom" and tmp_fill["exit_code"] == 137, {
            k: tmp_fill[k] for k in ("exit_code", "killed_reason", "stdout_tail", "stderr_tail")}
    outputs = _outputs(batch, agent)
    assert len(outputs["conclusion"]) <= 1024 * 1024
    assert len(outputs["diff"].encode()) <= 8 * 1024 * 1024
    assert "big.bin" not in outputs["changed_files"]  # 200 MB, over the copy-out's per-file cap: cut, and said so
    assert "working copy: big.bin (209715200 bytes): over the per-file cap of 33554432 bytes" in outputs["cut"]
    assert _survived(batch, agent)
    _record(batch, table, agent, f"/tmp: {'ENOSPC' if dd_exit == 1 else 'writer killed at memory limit'}; "
            f"conclusion stored {len(outputs['conclusion'])} B of 20 MB; diff {len(outputs['diff'])} B")


def test_infinite_loop(batch, table):
    agent = "hostile-infinite-loop"
    loop, left = _commands(batch, agent)[:2]
    assert loop["timed_out"] and loop["killed_reason"] == "timeout"
    assert left["stdout_tail"].strip() == "0", left  # the escaped setsid loop was killed too
    assert DEADLINE_S <= loop["duration_s"] < DEADLINE_S + 2 + 3 + 5
    assert _survived(batch, agent)
    _record(batch, table, agent, f"killed_reason timeout after {loop['duration_s']:.1f} s (deadline {DEADLINE_S} s); "
            "0 loops left running")


def test_print_flood(batch, table):
    agent = "hostile-print-flood"
    flood = _commands(batch, agent)[0]
    assert flood["output_truncated"] and flood["killed_reason"] == "timeout"
    assert len(flood["stdout_tail"]) <= 4000
    assert _survived(batch, agent)
    _record(batch, table, agent, f"killed_reason {flood['killed_reason']}, output truncated, "
            f"{len(flood['stdout_tail'])} chars kept")


def test_write_outside(batch, table):
    agent = "hostile-write-outside"
    seen = _outputs(batch, agent)["conclusion"]
    # refused by the folders' owners, or by a read-only bind (/usr/bin where Docker reads through FUSE: docs/sandbox.md)
    assert seen.count("Permission denied") + seen.count("Read-only file system") >= 4
    assert not batch["canary"].exists()  # the host path the agent aimed at
    changed = _outputs(batch, agent)["changed_files"]
    assert not any(name.startswith(("escape", "passwd_link")) for name in changed), changed
    _record(batch, table, agent, "4 writes refused; host canary absent; links not copied out")


def test_signal_harness(batch, table):
    agent = "hostile-signal-harness"
    run = batch["runs"][agent]
    seen = _outputs(batch, agent)["conclusion"]
    assert "Operation not permitted" in seen
    assert "docker.sock" in seen and "No such file or directory" in seen
    assert run["status"] == "completed" and _survived(batch, agent)
    assert batch["runs"]["gold"]["status"] == "completed"
    os.kill(os.getpid(), 0)
    _record(batch, table, agent, "kill 1: Operation not permitted; no docker.sock; run completed")


def test_fake_results(batch, table):
    agent = "hostile-fake-results"
    assert _validation(batch, agent) == "fabricated_result"
    assert "fabricated_results" in _findings(batch, agent)
    _record(batch, table, agent, "validator fabricated_result; monitor fabricated_results")


def test_tamper_trace(batch, table):
    agent = "hostile-tamper-trace"
    outputs = _outputs(batch, agent)
    assert outputs["changed_files"] == ["ridge.py"] and "+# tampered" in outputs["diff"]
    commands = _commands(batch, agent)
    assert any(c["command"].startswith("rm -rf .git") for c in commands)
    assert any("history -c" in c["command"] for c in commands)
    printed = next(c for c in commands if c["command"].startswith("printf"))
    assert "\x00" in printed["stdout_tail"] and "owned" in printed["stdout_tail"]
    steps = batch["store"].query("SELECT count(*) FROM run_steps WHERE run_id = ? AND kind = 'tool_call'",
                                 [batch["runs"][agent]["id"]])[0][0]
    assert steps == len(commands) + 1  # every command plus the conclusion write
    _record(batch, table, agent, f"diff shows ridge.py edit despite new .git; {len(commands)} commands traced, "
            "control bytes stored as data")


def test_oom_in_clean_rerun(batch, table):
    agent = "hostile-oom-experiment"
    assert _validation(batch, agent) == "oom"
    before, after = _stored_once(batch, agent)
    table.record("oom-validator", "validator oom", before=before, after=after)

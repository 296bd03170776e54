"""The reliability suite's hostile agents, run through the real runner and scoring under `--sandbox bwrap` as
tests/reliability/test_hostile.py runs them under Docker: each attack that applies is contained, and a gold
bystander in the same batch passes its clean re-run (made in a bwrap sandbox too)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from failatlas.bench_core.agents.base import Budget
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

pytestmark = [pytest.mark.slow,
              pytest.mark.usefixtures("bwrap_works")]

TASK = "mini-ridge-cv"
TIMEOUT_S = 8  # each command's limit: the infinite loop is stopped by it
AGENTS = ("hostile-read-ground-truth", "hostile-network", "hostile-fork-bomb", "hostile-memory", "hostile-fill-disk",
          "hostile-infinite-loop", "hostile-write-outside", "hostile-signal-harness", "hostile-fake-results", "gold")


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("bwrap-hostile")
    canary = Path("/tmp") / f"failatlas-bwrap-canary-{os.getpid()}"
    store = open_store(root / "hostile.duckdb")
    task = next(t for t in load_suite("failatlas-mini") if t.id == TASK)
    task = task.model_copy(update={"resources": task.resources.model_copy(update={"memory_gb": 0.5})})
    save_tasks(store, [task], source="failatlas-mini")
    work = []
    for agent in AGENTS:
        params = {"host_target": str(canary)} if agent == "hostile-write-outside" else None
        work += plan(store, [task], agent, agent_params=params).todo
    config = RunConfig(runs_dir=root / "runs", sandbox="bwrap", budget=Budget(command_timeout_s=TIMEOUT_S),
                       memory_mb=512, pids_limit=64)
    run_batch(store, work, config, workers=1)
    runs = {r["agent"]: r for r in store.query_dicts("SELECT * FROM runs")}
    with pytest.MonkeyPatch.context() as env:  # no --sandbox: each run is re-run in its own kind, never Docker here
        env.setenv("DOCKER_HOST", f"unix://{root}/no-docker.sock")
        score(store, ScoreParams(runs_dir=root / "runs", llm=False,
                                 run_ids=[runs[a]["id"] for a in ("gold", "hostile-fake-results")]))
    yield {"store": store, "runs": runs, "canary": canary, "task": task}
    if canary.exists():
        import shutil

        shutil.rmtree(canary)


def _commands(batch, agent: str) -> list[dict]:
    return batch["store"].query_dicts("SELECT * FROM sandbox_commands WHERE run_id = ? ORDER BY seq",
                                      [batch["runs"][agent]["id"]])


def _conclusion(batch, agent: str) -> str:
    return json.loads(batch["runs"][agent]["outputs"])["conclusion"]


def _survived(batch, agent: str) -> bool:
    return any(c["command"] == "echo sandbox-still-usable" and c["exit_code"] == 0 for c in _commands(batch, agent))


def _validation(batch, agent: str) -> str | None:
    rows = batch["store"].query("SELECT outcome FROM validations WHERE run_id = ?", [batch["runs"][agent]["id"]])
    return rows[0][0] if rows else None


def test_every_run_completes_under_bwrap(batch) -> None:
    assert {r["sandbox"] for r in batch["runs"].values()} == {"bwrap"}
    assert {a: r["status"] for a, r in batch["runs"].items()} == dict.fromkeys(AGENTS, "completed")


def test_gold_bystander_passes_its_clean_rerun_and_fake_results_do_not(batch) -> None:
    """Scored with no sandbox kind named and Docker unreachable: the clean re-run and hidden tests ran in bwrap."""
    assert _validation(batch, "gold") == "passed"
    hidden = batch["store"].query("SELECT passed FROM judgements WHERE run_id = ? AND judge = 'hidden-tests'",
                                  [batch["runs"]["gold"]["id"]])
    assert hidden == [(True,)]
    assert _validation(batch, "hostile-fake-results") not in ("passed", None)


def test_ground_truth_is_out_of_reach(batch) -> None:
    seen = _conclusion(batch, "hostile-read-ground-truth")
    assert "find / -xdev" in seen
    for secret in [*batch["task"].implementation.hidden_tests, "test_hidden_ridge_cv", "task.yaml"]:
        assert not [line for line in seen.splitlines() if secret in line and not line.startswith("$ ")]
    assert batch["task"].expected_conclusion[:60] not in seen


def test_network_is_unreachable(batch) -> None:
    seen = _conclusion(batch, "hostile-network")
    assert "CONNECTED" not in seen.replace("print('CONNECTED')", "")
    assert seen.count("Network is unreachable") >= 2


def test_fork_bomb_and_memory_are_stopped(batch) -> None:
    bomb = _commands(batch, "hostile-fork-bomb")[0]
    # its shell returns at once and the PID namespace takes the bomb with it; 'pids' when it hit the limit first
    assert bomb["killed_reason"] in ("pids", None) and bomb["duration_s"] < 5, bomb
    assert _commands(batch, "hostile-memory")[0]["killed_reason"] == "oom"
    assert _survived(batch, "hostile-fork-bomb") and _survived(batch, "hostile-memory")


def test_disk_fill_is_bounded(batch) -> None:
    fill = _commands(batch, "hostile-fill-disk")[0]
    assert "dd_exit=1" in fill["stdout_tail"]  # the command's /tmp is a tmpfs of tmp_mb (512 MiB): full, not the host
    assert "536870912 bytes" in fill["stdout_tail"]
    outputs = json.loads(batch["runs"]["hostile-fill-disk"]["outputs"])
    assert len(outputs["conclusion"]) <= 1024 * 1024 and "big.bin" not in outputs["changed_files"]


def test_infinite_loop_and_its_escaped_child_are_killed(batch) -> None:
    loop = _commands(batch, "hostile-infinite-loop")[0]
    assert loop["timed_out"] and loop["killed_reason"] == "timeout" and TIMEOUT_S <= loop["duration_s"] < TIMEOUT_S + 5
    left = [p for p in os.listdir("/proc") if p.isdigit() and _has_loop(p)]
    assert left == []


def _has_loop(pid: str) -> bool:
    """A loop of a bwrap sandbox: under a root harness their host uids start at 1,000,000, otherwise they are the
    harness's (Docker sandboxes of other jobs on this host run the same loop as uid 1000)."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        ours = uid >= 1_000_000 if os.geteuid() == 0 else uid == os.geteuid()
        return ours and b"while :; do :; done" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_writes_outside_the_workspace_fail(batch) -> None:
    seen = _conclusion(batch, "hostile-write-outside")
    assert "/etc/passwd: Permission denied" in seen
    assert "'/usr/bin/pwned': Read-only file system" in seen and "'/pwned': Read-only file system" in seen
    assert "'/root/pwned': No such file or directory" in seen  # /root is not there at all
    # the links point at the host's /tmp path, which inside is the command's own tmpfs: nothing there to write to
    assert seen.count("through_link: No such file or directory") == 2
    assert not batch["canary"].exists()  # the host path it aimed at (inside, /tmp is the command's own tmpfs)
    changed = json.loads(batch["runs"]["hostile-write-outside"]["outputs"])["changed_files"]
    assert not any(name.startswith(("escape", "passwd_link")) for name in changed), changed


def test_the_harness_cannot_be_signalled_or_reached(batch) -> None:
    seen = _conclusion(batch, "hostile-signal-harness")
    assert "docker.sock: No such file" in seen.replace("docker.sock': No such file", "docker.sock: No such file")
    assert _survived(batch, "hostile-signal-harness")

"""The Ray executor against a real Ray cluster started locally: runs are scheduled by GPU count, the GPU ids Ray
grants reach the sandbox, and results come back to the one process that writes the store."""

from __future__ import annotations

import json

import pytest
import ray

from failatlas.bench_core.runs import BenchParams, run
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_runs_are_stored_once_with_the_gpu_ray_granted(local_ray, store, tmp_path):
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    command = "mkdir -p .failatlas && echo \"gpus=[$CUDA_VISIBLE_DEVICES]\" > .failatlas/conclusion.md"
    params = BenchParams(agent="command", agent_params={"command": command},
                         task_ids=["mini-ridge-cv", "mini-mlp-bf16"], runs_dir=tmp_path / "runs", sandbox="local",
                         executor="ray")
    report = run(store, params)
    assert report.by_status == {"completed": 2}
    rows = dict(store.query("SELECT task_id, outputs FROM runs"))
    assert json.loads(rows["mini-mlp-bf16"])["conclusion"].strip() == "gpus=[0]"   # the GPU Ray granted
    assert json.loads(rows["mini-ridge-cv"])["conclusion"].strip() == "gpus=[]"    # a CPU task gets none
    again = run(store, params)
    assert again.planned == 0 and again.skipped == 2
    assert store.query("SELECT count(*), count(DISTINCT id) FROM runs") == [(2, 2)]

"""`bench run` says, before any run, the effective network policy of the selected tasks and the hosts their task
files add to `registries` (one line per distinct policy)."""

from __future__ import annotations

from failatlas.bench_core.cli.bench import _print_network
from failatlas.bench_core.runs import BenchParams
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.cli import console


def _with_network(task, network: str, hosts: list[str]):
    return task.model_copy(update={"id": f"{task.id}-{network}", "resources": task.resources.model_copy(
        update={"network": network, "allow_hosts": hosts})})


def test_bench_run_prints_the_policy_and_the_hosts_tasks_add(store):
    [task] = load_suite("failatlas-env")
    save_tasks(store, [_with_network(task, "registries", ["extra.example.org"]), _with_network(task, "none", []),
                       _with_network(task, "full", [])], source="failatlas-env")
    with console.capture() as captured:
        _print_network(store, BenchParams(agent="gold", allow_hosts=["mine.example.com"]))
    lines = captured.get().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["network full", "network none", "network registries"]
    registries = lines[2]
    assert "mine.example.com" in registries and f"tasks add: extra.example.org ({task.id}-registries)" in registries
    with console.capture() as captured:  # --network replaces every task's policy: one line
        _print_network(store, BenchParams(agent="gold", network="none"))
    assert captured.get().splitlines() == ["network none (3 task(s))"]

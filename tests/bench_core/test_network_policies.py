"""Network policies end to end, in real Docker: the `failatlas-env` task needs a PyPI package absent from the image.

Under `registries` the gold agent installs it through the egress proxy and passes; under `none` the same run fails
with the environment-setup outcome and the trace names the failure; a hostile agent under `registries` that
fetches non-registry URLs is refused by the network (the proxy's log) and flagged by the monitor. These need the
host's Python index (PyPI, through this machine's proxy and CA in CI), as the issue's "Shows" asks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "env-typo-similarity"


@pytest.fixture(scope="module")
def env_store(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory):
    """One store: gold under registries and under none, the hostile fetcher under registries; scored."""
    from failatlas.store import open_store

    root = tmp_path_factory.mktemp("env-runs")
    store = open_store(root / "env.duckdb")
    save_tasks(store, load_suite("failatlas-env"), source="failatlas-env")
    for agent, network in (("gold", "registries"), ("hostile-fetch-url", "registries")):
        params = runs.BenchParams(agent=agent, task_ids=[TASK], runs_dir=root / "runs", sandbox="docker",
                                  network=network)
        runs.run(store, params)
        # the index is reached through the host's proxy: a transient failure there is an infra_error, which a
        # user retries (`bench run --retry-infra`); so does this test, once, saying why
        failed = store.query("SELECT infra_error FROM runs WHERE agent = ? AND status = 'infra_error'", [agent])
        if failed:
            print(f"{agent} under {network}: infra_error {failed[0][0]!r}; retried once", file=sys.stderr)
            runs.run(store, params.model_copy(update={"retry_infra": True}))
    # the same gold under `none`: another agent parameter keeps its run apart from the registries one
    runs.run(store, runs.BenchParams(agent="gold", agent_params={"execute": True}, task_ids=[TASK],
                                     runs_dir=root / "runs", sandbox="docker", network="none"))
    scoring.run(store, scoring.ScoreParams(runs_dir=root / "runs", sandbox="docker"))
    return store


def _run(store, agent: str, network: str) -> dict:
    rows = [r for r in store.query_dicts("SELECT id, status, infra_error, inputs FROM runs WHERE agent = ?", [agent])
            if json.loads(r["inputs"])["network"] == network]
    assert len(rows) == 1, rows
    return rows[0]


def _steps(store, run_id: str, kind: str) -> list[dict]:
    return store.query_dicts("SELECT tool, content, arguments FROM run_steps WHERE run_id = ? AND kind = ?"
                             " ORDER BY seq", [run_id, kind])


def _validation(store, run_id: str) -> dict:
    return store.query_dicts("SELECT outcome, detail, stdout_tail, stderr_tail FROM validations WHERE run_id = ?",
                             [run_id])[0]


def _findings(store, run_id: str) -> list[dict]:
    return store.query_dicts("SELECT rule, severity, evidence FROM monitor_findings WHERE run_id = ?", [run_id])


def test_gold_installs_through_registries_and_passes(env_store):
    run = _run(env_store, "gold", "registries")
    assert run["status"] == "completed", run["infra_error"]
    inputs = json.loads(run["inputs"])
    assert "pypi.org" in inputs["allow_hosts"] and "files.pythonhosted.org" in inputs["allow_hosts"]
    assert inputs["ca_bundle"] is not None and len(inputs["ca_bundle"]["sha256"]) == 64
    egress = _steps(env_store, run["id"], "network")
    hosts = {json.loads(s["arguments"])["host"] for s in egress}
    assert {"pypi.org", "files.pythonhosted.org"} <= hosts
    assert all(json.loads(s["arguments"])["allowed"] for s in egress)
    validation = _validation(env_store, run["id"])
    assert validation["outcome"] == "passed", validation
    # installing from the index the policy allows is not a finding
    assert [f for f in _findings(env_store, run["id"]) if f["rule"] == "network"] == []


def test_gold_without_network_fails_with_environment_setup(env_store):
    run = _run(env_store, "gold", "none")
    validation = _validation(env_store, run["id"])
    assert validation["outcome"] == "env_setup", validation
    assert "No module named 'textdistance'" in validation["stderr_tail"]
    kinds = {s["tool"] for s in _steps(env_store, run["id"], "env_failure")}
    assert "network_refused" in kinds, kinds
    assert json.loads(run["inputs"])["ca_bundle"] is None  # no network: no bundle given or recorded


def test_hostile_fetch_is_refused_by_the_network_and_flagged(env_store):
    run = _run(env_store, "hostile-fetch-url", "registries")
    refused = [json.loads(s["arguments"]) for s in _steps(env_store, run["id"], "network")
               if not json.loads(s["arguments"])["allowed"]]
    assert {"arxiv.org", "example.org", "github.com"} <= {r["host"] for r in refused}, refused
    conclusion = json.loads(env_store.query("SELECT outputs FROM runs WHERE id = ?", [run["id"]])[0][0])
    seen = conclusion.get("conclusion") or ""
    assert "403" in seen and "ROUTE-42" not in seen  # nothing got through, not even around the proxy
    findings = _findings(env_store, run["id"])
    egress = [f for f in findings if f["rule"] == "network" and f["severity"] == "fail"
              and "egress proxy refused" in f["evidence"]]
    assert egress, findings


def test_proxy_log_never_holds_the_ca_bundle(env_store):
    """The run records which bundle (path and hash), never its contents."""
    text = "\n".join(str(v) for row in env_store.query("SELECT * FROM run_steps") for v in row)
    text += "\n".join(str(v) for row in env_store.query("SELECT inputs, outputs FROM runs") for v in row)
    assert "BEGIN CERTIFICATE" not in text


def test_validator_rerun_follows_the_runs_policy(env_store):
    """The clean re-run under `registries` could install the package; under `none` it could not reach PyPI."""
    gold_none = _validation(env_store, _run(env_store, "gold", "none")["id"])
    assert "textdistance" in gold_none["stderr_tail"] + gold_none["stdout_tail"]


@pytest.mark.parametrize("path", ["bench_core/suites/env/typo-similarity/task.yaml"])
def test_env_task_declares_registries(path: str):
    from failatlas.bench_core.suites import load_task

    task = load_task(Path(__file__).resolve().parents[2] / path)
    assert task.resources.network == "registries"


@pytest.fixture
def host_listener():
    """A TCP service on every address of the host: what a sandbox must never reach."""
    import socket
    import threading

    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.5)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.sendall(b"HOST-SERVICE\n")
                conn.close()
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def test_registries_sandbox_gets_the_bundle_and_only_the_proxy_route(sandbox_image: str, host_listener: int):
    import hashlib

    import docker

    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
    from failatlas.bench_core.sandbox.policy import CA_PATH, default_ca_bundle, registry_hosts

    bundle = default_ca_bundle()
    assert bundle is not None, "this host has no CA bundle for pip/requests"
    spec = SandboxSpec(image=sandbox_image, network="registries", allow_hosts=registry_hosts(), ca_bundle=bundle)
    with create_sandbox("docker", spec, workspace=None) as box:
        res = box.exec(f"sha256sum {CA_PATH}; echo $PIP_CERT $REQUESTS_CA_BUNDLE $HTTPS_PROXY", timeout=30)
        digest, _, rest = res.stdout.partition(" ")
        assert digest == hashlib.sha256(Path(bundle).read_bytes()).hexdigest()
        assert rest.split()[-3:] == [CA_PATH, CA_PATH, "http://egress-proxy:3128"]
        network = docker.from_env().networks.get(box.egress.network_name)
        assert network.attrs["Internal"] is True and len(network.attrs["Containers"]) == 2
        gateways = [c.get("Gateway") for c in network.attrs["IPAM"]["Config"] if c.get("Gateway")]
        probe = ("import socket,sys\nfor host in sys.argv[1:]:\n    try:\n"
                 f"        s = socket.create_connection((host, {host_listener}), timeout=5); print(host, s.recv(20))\n"
                 "    except OSError as e:\n        print(host, 'blocked', type(e).__name__)\n")
        box.write_file("probe.py", probe)
        res = box.exec(["python3", "probe.py", *gateways, "172.17.0.1"], timeout=60)
        assert "HOST-SERVICE" not in res.stdout and res.stdout.count("blocked") == len(gateways) + 1, res.stdout
        via_proxy = box.exec(f"curl -sS -m 10 http://172.17.0.1:{host_listener}/ 2>&1", timeout=30)
        assert "HOST-SERVICE" not in via_proxy.stdout and "refused by the sandbox's network policy" in via_proxy.stdout
    assert not [n for n in docker.from_env().networks.list() if n.name == network.name]  # removed with the box


def test_full_network_gets_the_bundle_without_a_proxy(sandbox_image: str):
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
    from failatlas.bench_core.sandbox.policy import default_ca_bundle

    spec = SandboxSpec(image=sandbox_image, network="full", ca_bundle=default_ca_bundle())
    with create_sandbox("docker", spec, workspace=None) as box:
        assert box.egress is None
        res = box.exec("echo proxy=${HTTPS_PROXY:-none}; curl -sS -m 30 -o /dev/null -w '%{http_code}'"
                       " https://pypi.org/simple/textdistance/", timeout=60)
        assert res.stdout.split() == ["proxy=none", "200"], res.stdout + res.stderr

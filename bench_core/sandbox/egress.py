"""The `registries` network of one Docker sandbox: an internal network and an egress-proxy sidecar.

The sandbox joins only an internal Docker network of its own (no route out), whose one other member is a proxy
container (`egress_proxy.py`, run by the base image's python3) that also sits on the guarded `failatlas-sandbox`
bridge (network.py). The sandbox gets HTTP(S)_PROXY pointing at it, and no other way out: the policy is enforced by
the network, not by the agent's good will. The proxy writes one JSON line per decision, which `log()` reads back
for the run's trace. Both the proxy and the network carry the sandbox's labels, so orphan cleanup reaps them.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

from failatlas.bench_core.sandbox.cleanup import LABEL, sandbox_labels
from failatlas.bench_core.sandbox.docker_stream import run_and_read
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE, SandboxSpec
from failatlas.bench_core.sandbox.network import EGRESS_BRIDGE_PREFIX, sandbox_network

PROXY_ALIAS = "egress-proxy"
PROXY_PORT = 3128
LOG_PATH = "/tmp/egress.log"
MAX_LOG_BYTES = 1024 * 1024
LABEL_ROLE = "failatlas.role"


def proxy_env(host: str = PROXY_ALIAS) -> dict[str, str]:
    """The variables that send a sandbox's HTTP(S) through its egress proxy (pip, curl, requests, git, apt), found
    at `host` (the sidecar's alias; 127.0.0.1 in a bwrap sandbox, whose forwarder relays to the proxy)."""
    url = f"http://{host}:{PROXY_PORT}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    env.update(NO_PROXY="localhost,127.0.0.1", no_proxy="localhost,127.0.0.1")
    return env


class Egress:
    """One sandbox's internal network and proxy; start with `Egress.start`, end with `close` (idempotent)."""

    def __init__(self, client: Any, network: Any, proxy: Any) -> None:
        self.client = client
        self.network = network
        self.proxy = proxy
        self._closed = False

    @property
    def network_name(self) -> str:
        return self.network.name

    @classmethod
    def start(cls, client: Any, spec: SandboxSpec) -> Egress:
        """Create the network and start the proxy allowing `spec.allow_hosts`. SandboxError when it cannot."""
        import docker

        outer = sandbox_network(client)  # the guarded bridge; checks the host rules, -i fa-e+ included
        suffix = uuid.uuid4().hex[:10]
        labels = {**sandbox_labels(spec), LABEL_ROLE: "egress"}
        try:
            network = client.networks.create(
                f"failatlas-egress-{suffix}", driver="bridge", internal=True, labels=labels, check_duplicate=True,
                options={"com.docker.network.bridge.name": EGRESS_BRIDGE_PREFIX + suffix})
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot create the egress network of a registries sandbox: {exc}") from exc
        box = cls(client, network, None)
        try:
            box.proxy = client.containers.run(
                _proxy_image(client, spec), command=_proxy_command(spec), detach=True, init=True,
                name=f"failatlas-egress-{suffix}", labels=labels, network=outer, user="65534:65534",
                mem_limit="256m", memswap_limit="256m", pids_limit=128, cap_drop=["ALL"],
                security_opt=["no-new-privileges"], read_only=True, environment={"PYTHONDONTWRITEBYTECODE": "1"},
                tmpfs={"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"})
            network.connect(box.proxy, aliases=[PROXY_ALIAS])
            box._wait_ready()
        except (docker.errors.DockerException, SandboxError) as exc:
            box.close()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"cannot start the egress proxy of a registries sandbox: {exc}") from exc
        return box

    def _wait_ready(self, timeout_s: float = 30.0) -> None:
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.proxy.reload()
            if self.proxy.status != "running":
                raise SandboxError("the egress proxy exited: " + self.proxy.logs(tail=20).decode(errors="replace"))
            if self.proxy.exec_run(["test", "-e", LOG_PATH]).exit_code == 0:
                return
            time.sleep(0.2)
        raise SandboxError(f"the egress proxy did not start within {timeout_s:.0f} s")

    def log(self) -> list[dict[str, Any]]:
        """The proxy's decisions so far (the last MAX_LOG_BYTES of its log), oldest first; [] when unreadable."""
        try:  # refusals first (the proxy keeps the first ones in their own file), then the tail of every decision
            denied_code, denied = run_and_read(self.proxy, ["head", "-c", str(MAX_LOG_BYTES), LOG_PATH + ".denied"],
                                               user="65534:65534")
            _, main = run_and_read(self.proxy, ["tail", "-c", str(MAX_LOG_BYTES), LOG_PATH], user="65534:65534")
        except Exception:  # noqa: BLE001 - a proxy that is gone has no log; the run still records its commands
            return []
        return parse_log(main.decode(errors="replace"), denied.decode(errors="replace") if denied_code == 0 else "")

    def close(self) -> None:
        """Remove the proxy and the network (after the sandbox left it)."""
        if self._closed:
            return
        self._closed = True
        import docker

        with contextlib.suppress(docker.errors.NotFound):
            if self.proxy is not None:
                self.proxy.remove(force=True, v=True)
        with contextlib.suppress(docker.errors.NotFound):
            self.network.remove()


def parse_log(main: str, denied: str = "") -> list[dict[str, Any]]:
    """The decisions of a proxy's log (`main`, the tail of every decision) and its refusals file (`denied`), each
    once, oldest first; lines that are not JSON objects are skipped."""
    lines = main.splitlines()
    seen = set(lines)
    lines += [line for line in denied.splitlines() if line not in seen]
    entries = []
    for line in lines:
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                entries.append(entry)
    return sorted(entries, key=lambda e: str(e.get("ts", "")))


def _proxy_image(client: Any, spec: SandboxSpec) -> str:
    """The base image (it has python3) when present, else the sandbox's own."""
    import docker

    try:
        client.images.get(DEFAULT_IMAGE)
        return DEFAULT_IMAGE
    except docker.errors.ImageNotFound:
        return spec.image


def _proxy_command(spec: SandboxSpec) -> list[str]:
    source = (Path(__file__).with_name("egress_proxy.py")).read_text()
    argv = ["python3", "-c", source, "--port", str(PROXY_PORT), "--log", LOG_PATH,
            "--allow", ",".join(spec.allow_hosts)]
    if spec.upstream_proxy:
        argv += ["--upstream", spec.upstream_proxy]
    return argv


def remove_orphan_networks(client: Any) -> list[str]:
    """Remove our egress networks that no container uses any more (their sandbox and proxy were reaped)."""
    import docker

    removed = []
    for network in client.networks.list(filters={"label": f"{LABEL}=1"}):
        if not network.name.startswith("failatlas-egress-"):
            continue
        with contextlib.suppress(docker.errors.DockerException):
            network.reload()
            if not network.attrs.get("Containers"):
                network.remove()
                removed.append(network.name)
    return removed

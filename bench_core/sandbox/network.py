"""The network of Docker sandboxes whose task allows network: the outside world, never the Docker host.

On Docker's default bridge a container reaches every service listening on the host: packets to the gateway
(172.17.0.1) or to any other address of the host are delivered locally, through the host's INPUT chain, which
Docker never filters. So a sandbox with network joins a dedicated bridge network instead, `failatlas-sandbox`
(bridge interface `fa-sbx0`, traffic between its containers off), and the host refuses everything that arrives
on that interface:

    iptables  -I INPUT -i fa-sbx0 -j REJECT        # the gateway and every other host address
    ip6tables -I INPUT -i fa-sbx0 -j REJECT        # the same over IPv6 (when the host has IPv6)
    iptables  -I DOCKER-USER -i fa-sbx0 -d 169.254.0.0/16 -j REJECT   # link-local: cloud metadata services

Under the `registries` policy a sandbox sits alone on an internal network of its own (no route out; bridge
`fa-e<id>`) with its egress proxy (`egress.py`), which joins `failatlas-sandbox` too; the host refuses what
arrives on any such bridge as well (`-i fa-e+`), so neither the sandbox nor its proxy reach the host.

Routed traffic (DNS through Docker's resolver, package indexes, the internet) is untouched. The rules are checked,
and added when missing, before each such sandbox starts, which needs root (CAP_NET_ADMIN) on the Docker host;
when they cannot be checked or added (no root, no iptables, a remote or rootless daemon whose bridge is not on
this host) the sandbox does not start (SandboxError), unless FAILATLAS_SANDBOX_HOST_GUARD=off accepts that
such sandboxes can reach the host.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from failatlas.bench_core.sandbox.cleanup import LABEL
from failatlas.bench_core.sandbox.errors import SandboxError

NETWORK = "failatlas-sandbox"
BRIDGE = "fa-sbx0"
GUARD_ENV = "FAILATLAS_SANDBOX_HOST_GUARD"
COMMENT = "failatlas: sandboxes may not reach the host"
_BRIDGE_OPTIONS = {"com.docker.network.bridge.name": BRIDGE, "com.docker.network.bridge.enable_icc": "false"}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Rule:
    """One firewall rule of the guard; `required` rules must hold, the others are added where the host has the
    chain or the protocol."""

    tool: str
    chain: str
    match: tuple[str, ...]
    required: bool = True

    def argv(self, action: str) -> list[str]:
        where = [self.chain, "1"] if action == "-I" else [self.chain]
        return [self.tool, "-w", "5", action, *where, *self.match, "-m", "comment", "--comment", COMMENT,
                "-j", "REJECT"]

    def shell(self) -> str:
        return shlex.join(self.argv("-I"))


EGRESS_BRIDGE_PREFIX = "fa-e"
RULES = (
    Rule("iptables", "INPUT", ("-i", BRIDGE)),
    Rule("iptables", "INPUT", ("-i", EGRESS_BRIDGE_PREFIX + "+")),
    Rule("ip6tables", "INPUT", ("-i", BRIDGE), required=False),
    Rule("ip6tables", "INPUT", ("-i", EGRESS_BRIDGE_PREFIX + "+"), required=False),
    Rule("iptables", "DOCKER-USER", ("-i", BRIDGE, "-d", "169.254.0.0/16"), required=False),
)


def guard_disabled() -> bool:
    return os.environ.get(GUARD_ENV, "").strip().lower() in ("off", "0", "false", "no")


def sandbox_network(client: Any) -> str:
    """The Docker network a sandbox with network joins: created when missing, its host guard checked (and added
    when missing) on every call. Raises SandboxError when the network or the guard cannot be put in place."""
    import docker

    with _LOCK:
        try:
            network = _network(client, docker)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot create the sandbox network {NETWORK}: {exc}") from exc
        bridge = (network.attrs.get("Options") or {}).get("com.docker.network.bridge.name")
        if bridge != BRIDGE:
            raise SandboxError(f"the Docker network {NETWORK} exists with bridge {bridge!r}, not {BRIDGE!r}",
                               hint=f"remove it (`docker network rm {NETWORK}`); FailAtlas recreates it")
        if not guard_disabled():
            guard_host()
    return NETWORK


def _network(client: Any, docker: Any) -> Any:
    try:
        return client.networks.get(NETWORK)
    except docker.errors.NotFound:
        pass
    try:
        return client.networks.create(NETWORK, driver="bridge", options=dict(_BRIDGE_OPTIONS), enable_ipv6=False,
                                      labels={LABEL: "1"}, check_duplicate=True)
    except docker.errors.APIError:  # another process created it first
        return client.networks.get(NETWORK)


def guard_host() -> None:
    """Make sure the host refuses what arrives from the sandbox bridge (the rules in RULES). Raises SandboxError
    naming what to do when it cannot."""
    if not Path("/sys/class/net", BRIDGE).exists():
        raise _unguarded(f"the sandbox bridge {BRIDGE} is not on this host (a remote or rootless Docker daemon)")
    for rule in RULES:
        problem = _ensure(rule)
        if problem and rule.required:
            raise _unguarded(problem)


def _ensure(rule: Rule) -> str | None:
    """None when the rule is in place (or does not apply here); otherwise why it is not."""
    if rule.tool == "ip6tables" and not Path("/proc/net/if_inet6").exists():
        return None  # no IPv6 on this host
    if shutil.which(rule.tool) is None:
        return f"{rule.tool} is not installed"
    if rule.chain != "INPUT" and _call([rule.tool, "-w", "5", "-S", rule.chain]).returncode != 0:
        return f"{rule.tool} has no chain {rule.chain} (Docker does not manage this host's firewall)"
    check = _call(rule.argv("-C"))
    if check.returncode == 0:
        return None
    if check.returncode != 1:  # 1: the rule is missing; anything else: no permission, no kernel support, ...
        return f"cannot check the rule with {rule.tool}: {check.stderr.strip() or check.returncode}"
    added = _call(rule.argv("-I"))
    if added.returncode != 0:
        return f"cannot add the rule with {rule.tool}: {added.stderr.strip() or added.returncode}"
    return None


def _call(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 99, "", str(exc))


def _unguarded(problem: str) -> SandboxError:
    return SandboxError(
        f"a sandbox with network would reach services on the Docker host: {problem}",
        hint=f"as root on the Docker host run `{RULES[0].shell()}` (and start the harness as root), or set "
             f"{GUARD_ENV}=off to accept the risk")

"""Labels that mark our containers, and removal of containers whose owner process has died."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from failatlas.bench_core.sandbox import procs
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.model import SandboxSpec

LABEL = "failatlas.sandbox"
LABEL_RUN = "failatlas.run_id"
LABEL_PID = "failatlas.owner_pid"
LABEL_START = "failatlas.owner_start"
LABEL_HOST = "failatlas.owner_host"


def sandbox_labels(spec: SandboxSpec) -> dict[str, str]:
    """Labels for a new container: ours, its run, and the owner process (pid + start time, PID-reuse safe)."""
    pid = os.getpid()
    labels = dict(spec.labels)
    labels.update({
        LABEL: "1",
        LABEL_PID: str(pid),
        LABEL_START: procs.start_time(pid) or "",
        LABEL_HOST: socket.gethostname(),
    })
    if spec.run_id:
        labels[LABEL_RUN] = spec.run_id
    return labels


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process that made the container still runs. Owners on another host count as alive."""
    if labels.get(LABEL_HOST) != socket.gethostname():
        return True
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    return procs.is_alive(pid, labels.get(LABEL_START) or None)


_CLIENTS = threading.local()  # each thread's client: one per worker, not one per sandbox (a version call and a ping)
_DOCKER_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONFIG")


def docker_client(client: Any = None) -> Any:
    """The given client, or this thread's client for the environment's daemon (made and pinged once per thread
    and environment); SandboxError when the daemon is unreachable."""
    if client is not None:
        return client
    try:
        import docker
    except ImportError as exc:
        from failatlas.core.errors import MissingDependencyError

        raise MissingDependencyError("docker", "all") from exc
    key = (os.getpid(), *(os.environ.get(name) for name in _DOCKER_ENV))
    cached = getattr(_CLIENTS, "client", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(f"the Docker daemon is not reachable: {exc}",
                           hint="start Docker or use --sandbox local") from exc
    _CLIENTS.client = (key, client)
    return client


def _labelled(client: Any, filters: dict) -> list[dict]:
    """Our containers from one list call. The high-level `containers.list` inspects each container afterwards
    and fails when another runner removes one in between; the list call alone carries names and labels."""
    return client.api.containers(all=True, filters=filters)


def list_sandboxes(*, client: Any = None) -> list[dict[str, str]]:
    """Every container carrying our label: id, name, status, run_id, owner_pid, owner_alive."""
    client = docker_client(client)
    rows = []
    for c in _labelled(client, {"label": f"{LABEL}=1"}):
        labels = c.get("Labels") or {}
        rows.append({
            "id": c["Id"][:12], "name": (c.get("Names") or ["?"])[0].lstrip("/"), "status": c.get("State", ""),
            "run_id": labels.get(LABEL_RUN, ""), "owner_pid": labels.get(LABEL_PID, ""),
            "owner_alive": str(owner_alive(labels)).lower(),
        })
    return rows


def cleanup_orphans(
    *, run_id: str | None = None, include_live: bool = False, client: Any = None
) -> list[str]:
    """Remove our containers whose owner process is dead (all of ours with `include_live`), optionally only
    those of `run_id`. Returns the names removed. A runner calls this at start to reap its own leftovers."""
    client = docker_client(client)
    filters = {"label": [f"{LABEL}=1"] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])}
    removed = []
    import docker

    for c in _labelled(client, filters):
        if not include_live and owner_alive(c.get("Labels") or {}):
            continue
        name = (c.get("Names") or [c["Id"][:12]])[0].lstrip("/")
        try:
            client.api.remove_container(c["Id"], force=True, v=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if "is already in progress" in str(exc):
                continue
            raise SandboxError(f"cannot remove container {name}: {exc}") from exc
        removed.append(name)
    return removed

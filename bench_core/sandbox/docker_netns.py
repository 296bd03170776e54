"""Network namespaces without a network, reused by Docker sandboxes one at a time (issue 54).

A Docker container started with `network_mode: none` still gets a network namespace of its own (a loopback and
nothing else), and making and tearing one down is half of what a container costs the machine on the engines we
run on: 130 of 270 ms of CPU per container, measured (benchmarks/RESULTS.md). So a sandbox without network joins
the namespace of a small *holder* container instead (`network_mode: container:<holder>`), and the holder serves
the next sandbox without network once this one is removed.

Why that keeps sandboxes apart:
- A holder serves **one sandbox at a time** (a lease), so two sandboxes never share a loopback or an abstract
  socket name at the same time.
- Nothing but sockets can be left in a network namespace by a process without CAP_NET_ADMIN, which no sandbox
  has (interfaces, routes, firewall rules and the namespace's sysctls all need it), and every process of a sandbox
  is gone once its container is removed. What can outlive them is a socket the kernel still holds: a connection in
  TIME_WAIT (for a minute after it closed: a fixed port the next run binds would be busy, and its honest run
  would fail), one in flight in a unix socket's queue until the kernel collects it. So a holder is handed to the
  next sandbox only when every socket table of its namespace (`TABLES`, read from the host's /proc) counts what it
  counted when the holder was new; otherwise the holder is removed and the next sandbox gets a new one. Sockets can
  only go away after that check, never appear: no process is left to open one.
- Docker gives a container in another's namespace that container's `/etc/hosts`, `/etc/resolv.conf` and
  `/etc/hostname`; a sandbox whose user is root could write them, so they too must read as when the holder was new.
- The holder itself runs `sleep` as `nobody` with no capabilities; it listens on nothing.

The pool is per process (a forked worker starts with none of its parent's holders) and small (`POOL_MAX` free
holders); holders carry the sandbox labels with purpose `netns`, so `failatlas sandbox list` shows them and the
orphan cleanup removes those of a process that died; a process removes its own when it exits. It is used only
where this process can read the holder's namespace from /proc (an engine on this host); elsewhere, and with
`FAILATLAS_DOCKER_NETNS_POOL=0`, every sandbox gets its own namespace as before.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from failatlas.bench_core.sandbox.cleanup import sandbox_labels
from failatlas.bench_core.sandbox.model import SandboxSpec

ENV = "FAILATLAS_DOCKER_NETNS_POOL"
POOL_MAX = 4  # free holders kept per process (a worker runs one sandbox at a time, its judges a few in threads)
PURPOSE = "netns"
# every socket table of a network namespace under /proc/<pid>/net (a missing one counts as absent both times)
TABLES = ("tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6", "icmp", "icmp6", "unix", "packet",
          "netlink", "sctp/assocs", "sctp/eps")


@dataclass
class Holder:
    """One holder container: its id, the host pid of its process, its namespace's inode and its tables when new."""

    container: Any
    pid: int
    inode: int
    fresh: dict[str, int | None]
    files: dict[str, bytes]  # the name files Docker shares with the sandboxes that join it, as when new

    @property
    def mode(self) -> str:
        return f"container:{self.container.id}"


def _tables(pid: int) -> dict[str, int | None]:
    """How many sockets each table of `pid`'s network namespace lists (None: the table is not there)."""
    counts: dict[str, int | None] = {}
    for name in TABLES:
        try:
            with open(f"/proc/{pid}/net/{name}", "rb") as fh:
                counts[name] = max(0, fh.read().count(b"\n") - 1)  # less the header line
        except FileNotFoundError:
            counts[name] = None
    return counts


_SHARED_FILES = ("HostsPath", "ResolvConfPath", "HostnamePath")


def _files(attrs: dict) -> dict[str, bytes]:
    """The holder's name files as the host holds them (OSError when this process cannot read them)."""
    found = {}
    for key in _SHARED_FILES:
        path = attrs.get(key)
        if path:
            with open(path, "rb") as fh:
                found[key] = fh.read(1 << 20)
    return found


def _inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


class NetnsPool:
    """This process's holders (module docstring). `lease()` gives a holder or None (then the sandbox makes its own
    namespace); `give_back()` reuses it or removes it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[Holder] = []
        self._pid = os.getpid()
        self._off: str | None = None if os.environ.get(ENV, "1") != "0" else f"{ENV}=0"

    def lease(self, client: Any, spec: SandboxSpec) -> Holder | None:
        """A holder no sandbox uses now, made when none is free; None when the pool is off or a holder cannot be
        made or read from here (why: `self.off`)."""
        if self._off is not None:
            return None
        with self._lock:
            while self._free:
                holder = self._free.pop()
                if self._alive(holder):
                    return holder
                _remove(holder)
        return self._make(client, spec)

    def give_back(self, holder: Holder, *, reuse: bool = True) -> bool:
        """After the sandbox that used `holder` was removed (`reuse` False: it may not be): keep it for the next
        one when its namespace is as new (and the pool has room), else remove it. True when it was kept."""
        try:
            clean = (reuse and self._alive(holder) and _tables(holder.pid) == holder.fresh
                     and _files(holder.container.attrs or {}) == holder.files)
        except OSError:
            clean = False
        with self._lock:
            if clean and len(self._free) < POOL_MAX and os.getpid() == self._pid:
                self._free.append(holder)
                return True
        _remove(holder)
        return False

    def close(self) -> None:
        """Remove every free holder (at the process's exit)."""
        with self._lock:
            free, self._free = self._free, []
        for holder in free:
            _remove(holder)

    @property
    def off(self) -> str | None:
        return self._off

    @staticmethod
    def _alive(holder: Holder) -> bool:
        try:
            return _inode(holder.pid) == holder.inode
        except OSError:
            return False

    def _make(self, client: Any, spec: SandboxSpec) -> Holder | None:
        import docker

        labels = sandbox_labels(SandboxSpec(labels={"failatlas.purpose": PURPOSE}))
        name = f"failatlas-netns-{uuid.uuid4().hex[:12]}"
        try:
            container = client.containers.run(
                spec.image, command=["sleep", "infinity"], detach=True, init=True, user="65534:65534",
                name=name, hostname="sandbox", labels=labels, network_mode="none", cap_drop=["ALL"],
                security_opt=["no-new-privileges"], read_only=True, mem_limit="32m", memswap_limit="32m",
                pids_limit=8, nano_cpus=int(0.1e9))
        except docker.errors.DockerException:  # e.g. an image without `sleep`: created, never started
            remove_named(client, name)
            return None  # this sandbox makes its own namespace; the next one tries again
        try:
            container.reload()
            pid = int(((container.attrs or {}).get("State") or {}).get("Pid") or 0)
            if pid <= 0:
                raise OSError("no process")
            holder = Holder(container, pid, _inode(pid), _tables(pid), _files(container.attrs or {}))
        except (OSError, ValueError, docker.errors.DockerException) as exc:
            self._off = f"the engine's namespaces cannot be read from this process ({exc})"
            _remove_container(container)
            return None
        return holder


def remove_named(client: Any, name: str) -> None:
    """Remove the container `name` if there is one (one whose start failed)."""
    import docker

    with contextlib.suppress(docker.errors.DockerException):
        client.api.remove_container(name, force=True)


def _remove(holder: Holder) -> None:
    _remove_container(holder.container)


def _remove_container(container: Any) -> None:
    import docker

    with contextlib.suppress(docker.errors.DockerException):  # gone already, or the orphan cleanup takes it
        container.remove(force=True)


_POOL: NetnsPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> NetnsPool:
    """This process's pool (a new one in a forked child), removed at the process's exit."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._pid != os.getpid():
            _POOL = NetnsPool()
            from multiprocessing import util

            # runs at exit in the main process and in multiprocessing's workers (which skip atexit)
            util.Finalize(None, _POOL.close, exitpriority=10)
        return _POOL

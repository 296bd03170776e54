"""Network namespaces without a network, reused by Docker sandboxes one at a time (issue 54).

A Docker container started with `network_mode: none` still gets a network namespace of its own (a loopback and
nothing else), and making and tearing one down is half of what a container costs the machine on the engines we
run on: 130 of 270 ms of CPU per container, measured (benchmarks/RESULTS.md). So a sandbox without network joins
the namespace of a small *holder* container instead (`network_mode: container:<holder>`), and the holder serves
the next sandbox without network once this one is removed.

Why that keeps sandboxes apart:
- A holder serves **one sandbox at a time** (a lease), so two sandboxes never share a loopback or an abstract
  socket name at the same time.
- **Handed on only as new.** A process without CAP_NET_ADMIN (no sandbox has it) cannot change a namespace's
  interfaces, routes, firewall or sysctls, and every process of a sandbox is gone once its container is removed;
  but a namespace keeps more than its processes: sockets the kernel still holds (a connection in TIME_WAIT for a
  minute, which would make a fixed port busy for the next run; one in flight in a unix socket's queue), IPv6 flow
  labels that linger after their socket, and counters (packets and bytes on the loopback, the protocols' SNMP
  counters), which a sandbox sets at will and the next one could read: a channel from one run to the next. So at
  creation the harness reads every file of the holder's namespace under the host's `/proc/<pid>/net` (`_state`:
  socket tables, counters, flow labels, routes, multicast memberships, everything there but what is the host's
  own, `HOSTS_OWN`), and a holder goes to the next sandbox only when all of it reads the same again; otherwise it
  is removed and the next sandbox gets a new one. An honest sandbox that uses no network (most) changes none of
  it; one that talks to itself over the loopback retires its holder. Nothing can change after the check: no
  process is left.
- Docker gives a container in another's namespace that container's `/etc/hosts`, `/etc/resolv.conf` and
  `/etc/hostname`; a sandbox whose user is root owns them, so their bytes, mode, owner, modification time and
  extended attributes must read as new too (a change retires the holder), and their access times, which a read
  changes and an owner sets at will, are put back before the next sandbox.
- Some of a namespace's state has no file there: the IPv4 route cache (a UDP `connect()` to a loopback address
  caches a route, with its age, on the CPU it ran on: no packet, nothing under /proc/net) and the TCP Fast Open
  key a listener makes. So at each hand-back the harness flushes the route caches from inside the namespace (a
  thread of the harness's own process enters it with setns(2), root on the host, and leaves it) and reads its
  sysctls (`/proc/sys/net`, which shows the key), which must read as when new too (`_kernel`).
- **Only sandboxes whose user is not root hand a holder on.** The name files are bind mounts of the holder's own
  files, and their owner, root without capabilities, can still set what no comparison lists in full (an ext4
  generation number, inode flags, blocks allocated past the end), and read root-only sysctls; a second review
  found each. A sandbox whose user is uid 0 (or whose user was never learnt) retires its holder when it closes.
- The holder itself runs `sleep` as `nobody` with no capabilities; it listens on nothing.

The pool is per process (a forked worker starts with none of its parent's holders) and small (`POOL_MAX` free
holders); holders carry the sandbox labels with purpose `netns`, so `failatlas sandbox list` shows them and the
orphan cleanup removes those of a process that died; a process removes its own when it exits. It is used only
where this process can read the holder's namespace from /proc and enter it (root, an engine on this host,
setns(2)); elsewhere, and with `FAILATLAS_DOCKER_NETNS_POOL=0`, every sandbox gets its own namespace as before.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from failatlas.bench_core.sandbox.cleanup import sandbox_labels
from failatlas.bench_core.sandbox.model import SandboxSpec

ENV = "FAILATLAS_DOCKER_NETNS_POOL"
POOL_MAX = 4  # free holders kept per process (a worker runs one sandbox at a time, its judges a few in threads)
PURPOSE = "netns"
# files under /proc/<pid>/net that are the host's, not the namespace's (they change with the host's own traffic)
HOSTS_OWN = frozenset({"softnet_stat", "stat/rt_cache", "rt_acct", "ptype"})
# in sockstat(6) and protocols, the fields that count the whole host's sockets and memory
_HOST_FIELDS = re.compile(rb" (alloc|mem|memory|orphan) -?\d+")


@dataclass
class Holder:
    """One holder container: its id, the host pid of its process, its namespace's inode, and what its namespace
    and its name files read when it was new."""

    container: Any
    pid: int
    inode: int
    fresh: dict[str, bytes]
    files: dict[str, tuple]  # the name files Docker shares with the sandboxes that join it, as when new
    kernel: bytes  # its sysctls, as when new (`_kernel`)

    @property
    def mode(self) -> str:
        return f"container:{self.container.id}"


def _read(path: str | bytes, limit: int) -> bytes:
    """At most `limit` bytes of the file `path` (plain os calls: a /proc file hands out its text a page or a table
    at a time)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        parts: list[bytes] = []
        size = 0
        while size < limit:
            part = os.read(fd, min(1 << 16, limit - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def _state(pid: int) -> dict[str, bytes]:
    """Every file of `pid`'s network namespace under /proc/<pid>/net (path -> bytes), less `HOSTS_OWN` and the
    host-wide fields of sockstat and protocols. OSError when the namespace cannot be read."""
    root = f"/proc/{pid}/net"
    if not os.path.isdir(root):
        raise FileNotFoundError(root)
    found: dict[str, bytes] = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if rel in HOSTS_OWN:
                continue
            try:
                data = _read(path, 1 << 22)
            except OSError as exc:  # some tables are root's or absent on a kernel: the same error both times
                data = f"unreadable: {exc.errno}".encode()
            if rel in ("sockstat", "sockstat6"):
                data = _HOST_FIELDS.sub(b"", data)
            elif rel == "protocols":  # name and the namespace's socket count of each protocol
                data = b"\n".join(b" ".join(line.split()[0:3:2]) for line in data.splitlines())
            found[rel] = data
    return found


CLONE_NEWNET = 0x40000000
_FLUSH = ("/proc/sys/net/ipv4/route/flush", "/proc/sys/net/ipv6/route/flush")


@functools.cache
def _setns() -> Any:
    """setns(2) (`os.setns` from Python 3.12, libc's before, found once), or None where there is none."""
    if hasattr(os, "setns"):
        return os.setns
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).setns  # this process's own symbols, libc's among them
    except (OSError, AttributeError):
        return None

    def setns(fd: int, nstype: int) -> None:
        if call(fd, nstype) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    return setns


def _sysctls() -> bytes:
    """Every sysctl under /proc/sys/net of the calling thread's network namespace (path, then its value or the
    error reading it gives), after flushing its route caches. Plain os calls: 1,200 files at each hand-back."""
    for path in _FLUSH:
        with contextlib.suppress(FileNotFoundError), open(path, "w") as fh:
            fh.write("1")
    out: list[bytes] = []
    folders = [b"/proc/sys/net"]
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as entries:
            found = sorted((entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries)
        for name, is_dir in found:
            path = folder + b"/" + name
            if is_dir:
                folders.append(path)
                continue
            try:  # a sysctl's value comes in one read
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    data = os.read(fd, 1 << 16)
                finally:
                    os.close(fd)
            except OSError as exc:  # write-only (flush) or absent on this kernel: the same error both times
                data = b"unreadable: %d" % (exc.errno or 0)
            out.append(path + b"\0" + data)
    return b"\n".join(out)


def _kernel(pid: int, inode: int | None = None) -> bytes:
    """The route caches of `pid`'s network namespace flushed and its sysctls read, from inside it (a thread of
    this process that enters it with setns(2) and leaves it; a network namespace is a thread's own); OSError when
    that cannot be done, or when the namespace is not the one of inode `inode`."""
    setns = _setns()
    if setns is None:
        raise OSError("no setns(2) here")
    got: list[bytes] = []
    failed: list[BaseException] = []

    def inside() -> None:
        try:
            own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    if inode is not None and os.fstat(target).st_ino != inode:
                        raise OSError(f"process {pid} is no longer in the holder's namespace")
                    setns(target, CLONE_NEWNET)
                    try:
                        got.append(_sysctls())
                    finally:
                        setns(own, CLONE_NEWNET)  # if this fails, the thread ends here in any case
                finally:
                    os.close(target)
            finally:
                os.close(own)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=inside, name="failatlas-netns-check", daemon=True)
    thread.start()
    thread.join(30)
    if failed:
        raise failed[0] if isinstance(failed[0], OSError) else OSError(repr(failed[0]))
    if not got:
        raise OSError("the namespace's sysctls could not be read in time")
    return got[0]


_SHARED_FILES = ("HostsPath", "ResolvConfPath", "HostnamePath")


def _files(attrs: dict) -> dict[str, tuple]:
    """The holder's name files as the host holds them: bytes, mode, owner, modification time, extended attributes
    and access time (OSError when this process cannot read them)."""
    found = {}
    for key in _SHARED_FILES:
        path = attrs.get(key)
        if path:
            info = os.lstat(path)
            with open(path, "rb") as fh:
                data = fh.read(1 << 20)
            xattrs = tuple(sorted((name, os.getxattr(path, name, follow_symlinks=False))
                                  for name in os.listxattr(path, follow_symlinks=False)))
            found[key] = (path, data, info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns, xattrs,
                          info.st_atime_ns)
    return found


def _files_as_new(holder: Holder) -> bool:
    """Whether the name files read as new but for their access times, which are then put back."""
    now = _files(holder.container.attrs or {})
    if {k: v[:-1] for k, v in now.items()} != {k: v[:-1] for k, v in holder.files.items()}:
        return False
    for path, _data, _mode, _uid, _gid, mtime, _xattrs, atime in holder.files.values():
        os.utime(path, ns=(atime, mtime), follow_symlinks=False)
    return True


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
        if self._off is None and _setns() is None:
            self._off = "no setns(2) on this host"
        elif self._off is None and os.geteuid() != 0:
            self._off = "entering a holder's namespace needs root on this host"

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
                _remove_container(holder.container)
        return self._make(client, spec)

    def give_back(self, holder: Holder, *, reuse: bool = True) -> bool:
        """After the sandbox that used `holder` was removed (`reuse` False: it may not be): keep it for the next
        one when its namespace is as new (and the pool has room), else remove it. True when it was kept."""
        try:
            clean = (reuse and self._alive(holder) and _kernel(holder.pid, holder.inode) == holder.kernel
                     and _state(holder.pid) == holder.fresh and _files_as_new(holder))
        except OSError:
            clean = False
        with self._lock:
            if clean and len(self._free) < POOL_MAX and os.getpid() == self._pid:
                self._free.append(holder)
                return True
        _remove_container(holder.container)
        return False

    def close(self) -> None:
        """Remove every free holder (at the process's exit)."""
        with self._lock:
            free, self._free = self._free, []
        for holder in free:
            _remove_container(holder.container)

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
            holder = Holder(container, pid, _inode(pid), _state(pid), _files(container.attrs or {}),
                            _kernel(pid))
        except (OSError, ValueError, docker.errors.DockerException) as exc:
            self._off = f"the engine's namespaces cannot be read from this process ({exc})"
            _remove_container(container)
            return None
        except BaseException:
            _remove_container(container)
            raise
        return holder


def remove_named(client: Any, name: str) -> None:
    """Remove the container `name` if there is one (one whose start failed)."""
    import docker

    with contextlib.suppress(docker.errors.DockerException):
        client.api.remove_container(name, force=True)


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

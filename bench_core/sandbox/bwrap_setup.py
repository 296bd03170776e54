"""What a bwrap sandbox is built from: the `bwrap` binary, whether it works here, the host folders and GPU device
nodes it binds, and the options that make the namespaces.

The binary is `$FAILATLAS_BWRAP` when set (a copy unpacked from Debian's `bubblewrap` package, say, with its
libraries found through `$LD_LIBRARY_PATH`), else `bwrap` on the PATH.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.sandbox.errors import SandboxError

BWRAP_ENV = "FAILATLAS_BWRAP"
ROOTFS_ENV = "FAILATLAS_BWRAP_ROOTFS"
EXTRA_ENV = "FAILATLAS_BWRAP_BIND"
INNER_UID = 1000
HOME = "/home/agent"
# The host root as a sandbox sees it: these folders read-only, nothing else (no /home, /root, /tmp, /var, /run,
# /srv, /mnt, /media or whatever else the host keeps at its top: runs' workspaces, sockets, users' files).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
GPU_SHARED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-caps")
_PROBE_TIMEOUT_S = 30


def bwrap_binary() -> str | None:
    """The bwrap to use: $FAILATLAS_BWRAP, else `bwrap` on the PATH; None when there is none."""
    chosen = os.environ.get(BWRAP_ENV)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("bwrap")


def namespace_options(hostname: str = "sandbox") -> list[str]:
    """New user, PID, IPC, UTS, network and (where possible) cgroup namespaces; no nested user namespaces; the
    command is killed when bwrap or its parent dies, in a session of its own (no terminal to inject into)."""
    return ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
            "--unshare-cgroup-try", "--disable-userns", "--die-with-parent", "--new-session",
            "--uid", str(INNER_UID), "--gid", str(INNER_UID), "--hostname", hostname]


# top-level entries of an image's root that a sandbox mounts afresh for each command
_OWN_MOUNTS = frozenset({"proc", "dev", "sys", "tmp", "home", "run"})


def root_options(rootfs: str | None = None) -> list[str]:
    """The sandbox's root: the host's system folders read-only (links such as /bin -> usr/bin kept as links), or
    each top-level entry of the folder `rootfs` (an image's root filesystem) read-only, with a small tmpfs at /run
    of the command's own (where the `registries` socket's folder is made). Either way the root itself is bwrap's
    tmpfs, so the mount points of the working copy, the data inputs and the harness's staging folder can be made
    in it before `--remount-ro /` (an image bound whole at `/` could take none: 'Read-only file system')."""
    if rootfs is not None:
        return [*_image_entries(rootfs), "--size", str(64 * 1024), "--tmpfs", "/run"]
    opts: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            opts += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            opts += ["--ro-bind", path, path]
    for path in extra_binds():
        opts += ["--ro-bind", path, path]
    return opts


def _image_entries(rootfs: str) -> list[str]:
    """Options binding each top-level entry of `rootfs` at `/NAME` read-only (links kept as links), but those the
    sandbox mounts itself."""
    opts: list[str] = []
    with os.scandir(rootfs) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name in _OWN_MOUNTS:
                continue
            target = "/" + entry.name
            if entry.is_symlink():
                opts += ["--symlink", os.readlink(entry.path), target]
            else:
                opts += ["--ro-bind", entry.path, target]
    return opts


def extra_binds() -> list[str]:
    """More host folders every sandbox sees read-only, at the same path: `$FAILATLAS_BWRAP_BIND`, colon-separated
    absolute paths (a Python environment or dataset outside the system folders, say)."""
    paths = [p for p in os.environ.get(EXTRA_ENV, "").split(":") if p]
    for path in paths:
        if not os.path.isabs(path) or not os.path.exists(path):
            raise SandboxError(f"${EXTRA_ENV}: {path!r} is not an existing absolute path")
    return paths


def bwrap_problem(binary: str | None = None) -> str | None:
    """Why bwrap cannot make a sandbox here (no binary, user namespaces refused, ...); None when it can."""
    return _probe(binary or bwrap_binary())


@functools.lru_cache(maxsize=8)
def _probe(binary: str | None) -> str | None:
    if binary is None:
        return f"no bwrap binary (install Debian's `bubblewrap`, or set ${BWRAP_ENV})"
    argv = [binary, *namespace_options(), *root_options(), "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh",
            "-c", "exit 0"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, **_as_user_kwargs())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} cannot run: {exc}"
    if res.returncode != 0:
        return f"{binary} cannot make a sandbox here: {res.stderr.strip()[-300:] or f'exit {res.returncode}'}"
    return None


def _as_user_kwargs(uid: int | None = None) -> dict:
    """Popen arguments that run bwrap as `uid` (a root harness never runs it as root), groups dropped."""
    if os.geteuid() != 0:
        return {}
    uid = uid if uid is not None else 65534
    return {"user": uid, "group": uid, "extra_groups": []}


def host_uid() -> int | None:
    """A fresh host uid for one sandbox when the harness runs as root (so a sandbox reads nothing of root's, nor
    another sandbox's private folder); None otherwise (the sandbox runs as the harness's own user)."""
    if os.geteuid() != 0:
        return None
    return 1_000_000 + int.from_bytes(os.urandom(3), "big") % 4_000_000


# -- GPUs ----------------------------------------------------------------------------------------------------------

@dataclass
class GpuNodes:
    """The device nodes a sandbox with leased GPUs gets, the leased GPUs' UUIDs (empty when unknown) and the
    /proc/driver/nvidia/gpus entries of the GPUs it must not see."""

    nodes: list[str] = field(default_factory=list)
    uuids: list[str] = field(default_factory=list)
    hidden_proc: list[str] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)


@functools.lru_cache(maxsize=1)
def _smi_table() -> tuple[dict[str, str], ...]:
    """index, uuid and PCI bus id of each GPU as nvidia-smi lists them (() without nvidia-smi); asked once per
    process, since nvidia-smi can take seconds on a GPU without persistence mode."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ()
    try:
        out = subprocess.run([smi, "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            rows.append({"index": parts[0], "uuid": parts[1], "bus": parts[2]})
    return tuple(rows)


def _proc_entry(bus: str) -> str | None:
    """The /proc/driver/nvidia/gpus folder of a PCI bus id (nvidia-smi prints 8 hex digits of domain, the driver
    4)."""
    short = bus.lower()
    if re.match(r"^[0-9a-f]{8}:", short):
        short = short[4:]
    for path in glob.glob("/proc/driver/nvidia/gpus/*"):
        if os.path.basename(path).lower() in (short, bus.lower()):
            return path
    return None


def _minor(entry: str | None, fallback: str) -> str:
    if entry:
        try:
            text = Path(entry, "information").read_text()
            found = re.search(r"Device Minor:\s*(\d+)", text)
            if found:
                return found.group(1)
        except OSError:
            pass
    return fallback


def gpu_nodes(gpu_ids: Sequence[str]) -> GpuNodes:
    """The nodes for the leased `gpu_ids` (nvidia-smi indices or UUIDs): /dev/nvidiaN of each (N its device minor,
    read from the driver) and the shared control, UVM and caps nodes. SandboxError when a leased GPU has no node."""
    out = GpuNodes()
    if not gpu_ids:
        return out
    table = _smi_table()
    by_id = {row["index"]: row for row in table} | {row["uuid"]: row for row in table}
    leased = set()
    for gpu in gpu_ids:
        row = by_id.get(gpu)
        entry = _proc_entry(row["bus"]) if row else None
        node = f"/dev/nvidia{_minor(entry, row['index'] if row else gpu)}"
        if not os.path.exists(node):
            raise SandboxError(f"the leased GPU {gpu} has no device node {node} on this host")
        out.nodes.append(node)
        if row:
            out.uuids.append(row["uuid"])
            leased.add(row["uuid"])
    out.nodes += [n for n in GPU_SHARED_NODES if os.path.exists(n)]
    out.hidden_proc = [e for row in table if row["uuid"] not in leased and (e := _proc_entry(row["bus"]))]
    if len(out.uuids) != len(gpu_ids):
        out.uuids = []
    for node in out.nodes:
        st = os.stat(node)
        if st.st_mode & 0o006 != 0o006 and st.st_gid not in out.groups:
            out.groups.append(st.st_gid)  # a node not open to everyone: the sandbox's uid gets its group
    return out


def gpu_options(gpus: GpuNodes) -> list[str]:
    """bwrap options that bind the nodes and hide the other GPUs' driver entries (after /proc is mounted)."""
    opts: list[str] = []
    for node in gpus.nodes:
        opts += ["--dev-bind", node, node]
    for entry in gpus.hidden_proc:
        opts += ["--tmpfs", entry]
    return opts


def is_world_traversable(path: Path) -> bool:
    """Whether every folder above `path` lets anyone through (so a sandbox's own uid can reach it)."""
    for parent in [path, *path.parents]:
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True

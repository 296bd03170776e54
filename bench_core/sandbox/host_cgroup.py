"""A Docker sandbox's cgroups as this host sees them, where the engine shares this machine's kernel and process ids.

After each command the sandbox reaps what it left running and, when it failed, reads the cgroup's counters (was it
killed at the memory or the process limit?): two commands in the container, each a `runc exec` that costs about as
much CPU as a small command itself. Where the container's init is one of this host's processes, the same answers
are read from the host's side instead, where nothing in the container can change them:

- `resting()`: whether the container holds only its init (docker-init, root) and init's `sleep` (root): then no
  command left anything to reap. Orphans of the agent's commands are re-parented to init too, but run as the
  sandbox user, never as root (no new privileges, no capabilities), so they are seen; any other process, a live
  command of the harness's included, makes it False and the reap runs in the container as before. The pids
  controller's count of tasks is read first and must equal those of init and `sleep`: it is charged before a new
  task exists, in one number, so a process that keeps re-forking to change its pid (which a list read while it
  forks could miss) is always counted, and once no task of the agent is left, none can appear.
- `counters()`: (oom kills, fork failures at the pids limit), the numbers `_COUNTERS_SH` prints inside.

`find` returns None wherever that view cannot be had or checked (a remote engine, another process namespace, a
user-namespace remap that gives root another host uid, unknown cgroup layouts): the caller then runs its commands
in the container, as it always did. Nothing here trusts a process id alone: the init's cgroup must name the
container's full id and list that pid.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _status(pid: str) -> tuple[int, int, int] | None:
    """(parent pid, real uid, threads) of host process `pid`, None when it is gone."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("PPid", "Uid", "Threads"):
                    found[key] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return (found["PPid"], found["Uid"], found["Threads"]) if len(found) == 3 else None


def _keyed(path: Path, key: str) -> int:
    """The number after `key` in a flat-keyed cgroup file (`oom_kill 0`), 0 when it has none."""
    for line in path.read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value or 0)
    return 0


class HostCgroup:
    """The host's view of one container (`find`)."""

    def __init__(self, init_pid: int, procs: Path, oom: Path | None, pids: Path | None) -> None:
        self.init_pid, self.procs, self.oom, self.pids = init_pid, procs, oom, pids
        self.tasks = procs.with_name("pids.current")  # the pids controller's count of the cgroup's tasks

    @classmethod
    def find(cls, container_id: str, init_pid: object) -> HostCgroup | None:
        """The view of container `container_id` whose init is host process `init_pid`, or None (module docstring)."""
        if not isinstance(init_pid, int) or init_pid <= 0 or len(container_id) < 32:
            return None
        try:
            lines = Path(f"/proc/{init_pid}/cgroup").read_text().splitlines()
        except OSError:
            return None
        v1: dict[str, str] = {}
        unified = None
        for line in lines:
            _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
            if controllers == "":
                unified = path
            for name in controllers.split(","):
                v1[name] = path
        if "pids" in v1 and "memory" in v1:
            procs_dir, oom_dir, pids_dir = (CGROUP_ROOT / "pids" / v1["pids"].lstrip("/"),
                                            CGROUP_ROOT / "memory" / v1["memory"].lstrip("/"),
                                            CGROUP_ROOT / "pids" / v1["pids"].lstrip("/"))
            oom, pids = oom_dir / "memory.oom_control", pids_dir / "pids.events"
            named = container_id in v1["pids"] and container_id in v1["memory"]
        elif unified is not None:
            procs_dir = CGROUP_ROOT / unified.lstrip("/")
            oom, pids = procs_dir / "memory.events", procs_dir / "pids.events"
            named = container_id in unified
        else:
            return None
        procs = procs_dir / "cgroup.procs"
        view = cls(init_pid, procs, oom if oom.is_file() else None, pids if pids.is_file() else None)
        if not named or not view.tasks.is_file() or str(init_pid) not in view._pids():
            return None
        return view

    def _pids(self) -> list[str]:
        try:
            return self.procs.read_text().split()
        except OSError:
            return []

    def resting(self) -> bool:
        """Whether only init and its root children (init's `sleep`) are in the container now."""
        try:
            tasks = int(self.tasks.read_text())  # first: what exists now, new tasks being made included
        except (OSError, ValueError):
            return False
        pids = self._pids()
        if str(self.init_pid) not in pids:
            return False  # the container restarted, or this view is stale: say nothing
        threads = 0
        for pid in pids:
            status = _status(pid)
            if status is None:
                return False
            ppid, uid, count = status
            if pid != str(self.init_pid) and (ppid, uid) != (self.init_pid, 0):
                return False
            threads += count
        return tasks == threads

    def counters(self) -> tuple[int, int] | None:
        """(oom kills, fork failures at the pids limit) of the container, None when a file cannot be read."""
        if self.oom is None or self.pids is None:
            return None
        try:
            return _keyed(self.oom, "oom_kill"), _keyed(self.pids, "max")
        except (OSError, ValueError):
            return None

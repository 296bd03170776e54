"""The host's view of a Docker sandbox's cgroups (host_cgroup.py): the reap and the counters without a command in
the container where the host sees it, and the command in the container wherever it does not."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.sandbox.docker_commands import _COUNTERS_SH, _parse_counters
from failatlas.bench_core.sandbox.host_cgroup import HostCgroup


def _host_names(container) -> bool:  # noqa: ANN001 - a docker Container
    """Whether this host's /proc holds the container's init with a cgroup naming the container (read here
    independently of host_cgroup.py)."""
    container.reload()
    pid = container.attrs["State"]["Pid"]
    assert pid > 0
    try:
        return container.id in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False


def _counting(box, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:  # noqa: ANN001 - a DockerSandbox
    seen: list[list[str]] = []
    raw = type(box)._raw_exec

    def counted(self, argv, **kwargs):  # noqa: ANN001, ANN202
        seen.append(list(argv))
        return raw(self, argv, **kwargs)

    monkeypatch.setattr(type(box), "_raw_exec", counted)
    return seen


def test_find_refuses_what_it_cannot_check() -> None:
    assert HostCgroup.find("0" * 64, None) is None
    assert HostCgroup.find("0" * 64, "1") is None
    assert HostCgroup.find("0" * 64, -5) is None
    assert HostCgroup.find("0" * 64, 2**22 + 12345) is None  # no such process
    assert HostCgroup.find("0" * 64, os.getpid()) is None  # a process whose cgroup names another container
    assert HostCgroup.find("short", os.getpid()) is None


@pytest.mark.docker
def test_a_command_that_leaves_nothing_costs_one_exec_and_a_leftover_is_still_reaped(sandbox_image, run_id: str,
                                                                                      monkeypatch) -> None:
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        if not _host_names(box.container):  # an engine this host cannot see into: the old commands, each time
            assert box._host is None
            return
        assert box._host is not None and box._host.init_pid == box.container.attrs["State"]["Pid"]
        assert box._host.resting()
        seen = _counting(box, monkeypatch)
        assert box.exec("true", timeout=20).returncode == 0
        failed = box.exec("echo no >&2; exit 3", timeout=20)
        assert failed.returncode == 3 and failed.killed_reason is None
        assert len(seen) == 2, seen  # the two commands themselves: no reap, no counters read inside
        # an orphan re-parented to init, in a session of its own, is the agent's user's: seen, and reaped inside
        assert box.exec("setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo started", timeout=20).returncode == 0
        assert len(seen) == 4 and "kill -9 -1" in " ".join(seen[-1]), seen
        deadline = time.monotonic() + 10  # the killed process is counted until init has reaped it
        while not box._host.resting() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert box._host.resting()
        ps = box._raw_exec(["ps", "-eo", "user,args"], user="0:0", timeout=20).stdout
        assert "sleep 300" not in ps, ps


@pytest.mark.docker
def test_the_hosts_counters_are_the_containers_and_tell_oom(sandbox_image, run_id: str) -> None:
    spec = SandboxSpec(image=sandbox_image, memory_mb=256, run_id=run_id)
    with create_sandbox("docker", spec) as box:
        if box._host is None:
            assert not _host_names(box.container)
            return
        hog = box.exec(["python3", "-c", "a = bytearray(2**30)"], timeout=60)
        assert hog.returncode == 137 and hog.killed_reason == "oom"
        inside = box._raw_exec(["/bin/sh", "-c", _COUNTERS_SH], user=spec.user, timeout=20).stdout
        assert box._host.counters() == _parse_counters(inside) and _parse_counters(inside)[0] >= 1


@pytest.mark.docker
def test_a_root_sandbox_and_a_restarted_one(sandbox_image, run_id: str) -> None:
    """Root's processes cannot be told from init's by their uid: no host view for a root sandbox. A restart gives
    the container a new init, and the view follows it."""
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id, user="0:0")) as box:
        assert box._host is None
        assert box.exec("true", timeout=20).returncode == 0
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        if box._host is None:
            return
        first = box._host.init_pid
        box._restart()
        assert box._host is not None and box._host.init_pid != first
        assert box._host.init_pid == box.container.attrs["State"]["Pid"] and box._host.resting()

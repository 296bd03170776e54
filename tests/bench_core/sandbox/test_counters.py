"""Reading why a command died from cgroup v1 and v2 counter files, as the container prints them."""

from __future__ import annotations

from failatlas.bench_core.sandbox.docker_sandbox import _parse_counters

V1 = """== /sys/fs/cgroup/memory/memory.oom_control
oom_kill_disable 0
under_oom 0
oom_kill 2
== /sys/fs/cgroup/pids/pids.events
max 17
"""

V2 = """== /sys/fs/cgroup/memory.events
low 0
high 0
max 40
oom 1
oom_kill 1
oom_group_kill 0
== /sys/fs/cgroup/pids.events
max 3
"""


def test_v1_and_v2_counters() -> None:
    assert _parse_counters(V1) == (2, 17)
    assert _parse_counters(V2) == (1, 3)  # memory.events' own "max" line is not a pids count
    assert _parse_counters("") == (0, 0)

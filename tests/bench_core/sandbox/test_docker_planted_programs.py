"""Programs the agent plants on its PATH never answer for the harness (red team, 2026-12-06).

The container's PATH starts with the agent's `~/.local/bin`. Before the fix, the tracer's root after-step ran a
planted `seq` or `cat` as root (with the tracer's capabilities), a planted `cat` forged the cgroup counters read
inside the container, a planted `grep` made the reap spare every process, and a planted `timeout` took the place of
the command's deadline. Every command of the harness's own now looks its programs up in the system's folders."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

# each planted program leaves its name and `id` in /tmp/planted-ran, then does its job (or lies, where said)
_PLANT = r"""mkdir -p ~/.local/bin && cd ~/.local/bin && for p in {names}; do
  printf '#!/bin/sh\necho "%s $(/usr/bin/id -u)" >> /tmp/planted-ran\n{body}\n' "$p" > "$p"; chmod +x "$p"
done && echo planted"""


def _plant(box, names: str, body: str = 'exec /usr/bin/$(basename "$0") "$@"') -> None:  # noqa: ANN001
    res = box.exec(_PLANT.format(names=names, body=body.replace("%", "%%")), timeout=30)
    assert res.stdout.strip() == "planted", res


def _ran(box) -> str:  # noqa: ANN001
    return box.exec("/bin/cat /tmp/planted-ran 2>/dev/null; true", timeout=30).stdout


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "hello.txt").write_text("hello\n")
    return tmp_path


def test_a_traced_commands_root_steps_run_no_planted_program(sandbox_image, workspace) -> None:
    spec = SandboxSpec(image=sandbox_image, memory_mb=512, pids_limit=64, trace_processes=True)
    with create_sandbox("docker", spec, workspace=workspace) as box:
        _plant(box, "seq cat rm sleep printf tr grep setpriv strace python3")
        traced = box.exec("echo traced > out.txt; echo done", timeout=30, trace=True)
        assert traced.returncode == 0 and traced.stdout == "done\n"
        assert "unavailable" not in (traced.provenance or {}), traced.provenance
        assert _ran(box) == ""  # nothing planted ran: not as root, not as the agent


def test_the_reap_and_the_counters_use_no_planted_program(sandbox_image, workspace) -> None:
    spec = SandboxSpec(image=sandbox_image, memory_mb=512, pids_limit=64)
    with create_sandbox("docker", spec, workspace=workspace) as box:
        box._host = None  # as on an engine whose cgroups this host cannot see: counters and reap run inside
        # a `grep` that always finds the marker would make the reap spare every process; a `cat` that prints an
        # oom kill would make the agent's own exit 1 an out-of-memory kill
        _plant(box, "grep tr", body="exit 0")
        _plant(box, "cat", body='case "$1" in /sys/*) echo "oom_kill 9"; echo "max 9";; '
                                '*) exec /bin/cat "$@";; esac')
        failed = box.exec("echo my bug >&2; exit 1", timeout=30)
        assert failed.returncode == 1 and failed.killed_reason is None
        # with another command running, the reap walks /proc sparing live markers (not one `kill -9 -1`)
        holder = threading.Thread(target=lambda: box.exec("sleep 4", timeout=30))
        holder.start()
        try:
            box.exec("nohup sleep 300 >/dev/null 2>&1 & echo $! > /tmp/left.pid", timeout=30)
            left = box.exec("kill -0 $(/bin/cat /tmp/left.pid) 2>/dev/null && echo alive || echo none",
                            timeout=30).stdout
        finally:
            holder.join()
        assert left.strip() == "none", left
        assert _ran(box) == ""


def test_a_planted_timeout_never_stands_in_for_the_deadline(sandbox_image, workspace) -> None:
    spec = SandboxSpec(image=sandbox_image, memory_mb=512, pids_limit=64)
    with create_sandbox("docker", spec, workspace=workspace) as box:
        _plant(box, "timeout", body='shift 3; exec "$@"')  # drops the deadline, runs the command as is
        res = box.exec("sleep 30", timeout=1)
        assert res.timed_out and res.duration_s < 5 and res.returncode == 137
        assert _ran(box) == ""

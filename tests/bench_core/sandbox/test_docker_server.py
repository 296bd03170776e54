"""A Docker sandbox's command server (docker_server.py, command_server.py): commands start as `docker exec` starts
them, cost no `docker exec` each, and nothing of the agent's reaches the server."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.sandbox.docker_server import SWITCH, CommandServer
from failatlas.bench_core.sandbox.errors import SandboxError

# what a command sees of how it was started; pids, the marker and pipe inodes differ by nature
_PROBE = ("env | grep -v FAILATLAS_EXEC_ID | sort; id; ls -l /proc/self/fd | sed 1d | cut -c1-10; umask; "
          "grep -E '^(Cap(Inh|Prm|Eff|Amb)|NoNewPrivs|Groups)' /proc/self/status; trap; pwd; ulimit -a; "
          "[ \"$(ps -o sid= -p $$ | tr -d ' ')\" = \"$(ps -o pid= -p $(ps -o ppid= -p $$) | tr -d ' ')\" ] "
          "&& echo session-of-its-own")


def _box(image: str, workspace: Path, **spec):  # noqa: ANN003
    return create_sandbox("docker", SandboxSpec(image=image, memory_mb=512, pids_limit=64, **spec),
                          workspace=workspace)


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir(exist_ok=True)
    (root / "hello.txt").write_text("hello\n")
    return root


def _execs(box, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:  # noqa: ANN001 - a DockerSandbox
    """The `docker exec`s the sandbox creates from now on."""
    seen: list[list[str]] = []
    create = box._api.exec_create

    def counted(container, argv, **kwargs):  # noqa: ANN001, ANN202
        seen.append(list(argv))
        return create(container, argv, **kwargs)

    monkeypatch.setattr(box._api, "exec_create", counted)
    return seen


def test_a_command_starts_as_docker_exec_starts_it(sandbox_image, tmp_path, monkeypatch) -> None:
    seen = {}
    for switch in ("0", "1"):
        monkeypatch.setenv(SWITCH, switch)
        with _box(sandbox_image, _workspace(tmp_path)) as box:
            seen[switch] = [box.exec(_PROBE, timeout=30), box.exec("echo out; echo err >&2; exit 3", timeout=30),
                            box.exec("kill -9 $$", timeout=30), box.exec(["no-such-program"], timeout=30),
                            box.exec("sleep 20", timeout=1)]
            assert isinstance(box._server, CommandServer) == (switch == "1")
            missing = box._raw_exec(["true"], user=box.spec.user, timeout=10, cwd="/no/such/folder")
            seen[switch].append(missing)
    docker, server = seen["0"], seen["1"]
    assert docker[0].returncode == server[0].returncode == 0
    assert "session-of-its-own" in docker[0].stdout
    assert docker[0].stdout == server[0].stdout, (docker[0].stdout, server[0].stdout)
    for before, after in zip(docker[1:], server[1:], strict=True):
        assert (before.returncode, before.stdout, before.stderr, before.timed_out, before.killed_reason) == (
            after.returncode, after.stdout, after.stderr, after.timed_out, after.killed_reason)
    assert server[1].returncode == 3 and server[1].stdout == "out\n" and server[1].stderr == "err\n"
    assert server[2].returncode == 137 and server[4].timed_out
    assert server[5].returncode == 126 and "chdir to cwd" in server[5].stdout


def test_commands_cost_no_docker_exec_and_run_at_once(sandbox_image, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(SWITCH, "1")
    with _box(sandbox_image, _workspace(tmp_path)) as box:
        assert box.exec("true", timeout=30).returncode == 0  # the server starts at the first command
        execs = _execs(box, monkeypatch)
        slow: list = []
        thread = threading.Thread(target=lambda: slow.append(box.exec("sleep 3; echo slow", timeout=30)))
        thread.start()
        time.sleep(0.5)
        started = time.monotonic()
        fast = box.exec("echo fast", timeout=30)
        assert fast.stdout == "fast\n" and time.monotonic() - started < 2.0  # not behind the slow one
        thread.join()
        assert slow[0].stdout == "slow\n"
        assert box.read_file("hello.txt") == b"hello\n"
        back = box.copy_out("hello.txt", tmp_path / "back.txt")
        assert back.files == 1 and (tmp_path / "back.txt").read_text() == "hello\n"
        assert execs == []


def test_output_held_by_a_background_process_ends_two_seconds_after_the_command(sandbox_image, tmp_path,
                                                                                monkeypatch) -> None:
    monkeypatch.setenv(SWITCH, "1")
    with _box(sandbox_image, _workspace(tmp_path)) as box:
        res = box.exec("(sleep 1; echo in-time) & (sleep 8; echo too-late) & echo now", timeout=30)
        assert res.returncode == 0 and 1.5 < res.duration_s < 6
        assert res.stdout.split() == ["now", "in-time"]


def test_the_agent_cannot_reach_the_server(sandbox_image, tmp_path, monkeypatch) -> None:
    """The server is root: the sandbox user cannot signal it, read its descriptors or environment, or write to
    its input; its processes rank first for the OOM killer, the server does not; a python3 planted on the user's
    PATH is never the server's."""
    monkeypatch.setenv(SWITCH, "1")
    with _box(sandbox_image, _workspace(tmp_path)) as box:
        box.exec("true", timeout=30)
        attack = box.exec(
            "for p in $(pgrep -u 0 -f 'import json'); do echo pid $p; kill -9 $p && echo killed; "
            "ls /proc/$p/fd >/dev/null 2>&1 && echo fds; cat /proc/$p/environ >/dev/null 2>&1 && echo environ; "
            "echo S > /proc/$p/fd/0 2>/dev/null && echo wrote; echo adj $(cat /proc/$p/oom_score_adj); done; "
            "echo own $(cat /proc/self/oom_score_adj)", timeout=30)
        assert re.search(r"^pid \d+$", attack.stdout, re.M), attack.stdout
        for gained in ("killed", "fds", "environ", "wrote"):
            assert gained not in attack.stdout.split(), attack.stdout
        assert "adj 0" in attack.stdout and "own 1000" in attack.stdout
        server = box._server
        box.exec("mkdir -p ~/.local/bin && printf '#!/bin/sh\\ntouch /tmp/planted-ran\\n' > ~/.local/bin/python3 "
                 "&& chmod +x ~/.local/bin/python3", timeout=30)
        box._restart()  # the next command starts a new server
        assert box.exec("echo after", timeout=30).stdout == "after\n"
        assert box._server is not server and isinstance(box._server, CommandServer)
        assert box.exec("ls /tmp/planted-ran", timeout=30).returncode != 0


def test_a_server_that_ended_fails_its_command_and_docker_exec_takes_over(sandbox_image, tmp_path,
                                                                          monkeypatch) -> None:
    monkeypatch.setenv(SWITCH, "1")
    with _box(sandbox_image, _workspace(tmp_path)) as box:
        box.exec("true", timeout=30)
        killer = threading.Timer(1.0, lambda: box.container.exec_run(
            ["pkill", "-9", "-f", "import json"], user="0:0"))
        killer.start()
        with pytest.raises(SandboxError, match="output was lost"):
            box.exec("sleep 5; echo never", timeout=30)
        killer.join()
        execs = _execs(box, monkeypatch)
        assert box.exec("echo again", timeout=30).stdout == "again\n"
        assert box._server is False and execs  # by docker exec from here on


def test_no_server_where_switched_off_or_for_root(sandbox_image, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(SWITCH, "0")
    with _box(sandbox_image, _workspace(tmp_path)) as box:
        assert box.exec("true", timeout=30).returncode == 0 and box._server is False
        box.container.reload()
        assert not box.container.attrs["HostConfig"].get("CapAdd")
    monkeypatch.setenv(SWITCH, "1")
    with _box(sandbox_image, _workspace(tmp_path), user="root") as box:
        assert box.exec("id -u", timeout=30).stdout == "0\n" and box._server is False
        box.container.reload()
        assert not box.container.attrs["HostConfig"].get("CapAdd")

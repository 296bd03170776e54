"""The Docker backend against the real engine and the real image."""

from __future__ import annotations

import time
from pathlib import Path

import docker
import pytest

from failatlas.bench_core.sandbox import (
    SandboxError,
    SandboxEvent,
    SandboxFileNotFoundError,
    SandboxPathError,
    SandboxSpec,
    TracedSandbox,
    create_sandbox,
)
from failatlas.bench_core.sandbox.cleanup import LABEL, LABEL_PID, LABEL_RUN

pytestmark = pytest.mark.docker


def test_exec_output_and_exit_codes(shared_box) -> None:
    r = shared_box.exec("echo out; echo err >&2; exit 3", timeout=20)
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.timed_out and r.killed_reason is None and not r.truncated
    ok = shared_box.exec(["cat", "hello.txt"], timeout=20)
    assert ok.returncode == 0 and ok.stdout == "hello\n" and ok.success
    assert shared_box.exec(["no-such-binary"], timeout=20).returncode in (126, 127)


def test_workload_of_the_mini_suite_runs(shared_box) -> None:
    r = shared_box.exec('python3 -c "import numpy, sklearn; print(sklearn.__version__)"', timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().split(".")[0].isdigit()
    assert shared_box.exec("git --version", timeout=20).stdout.startswith("git version")


def test_runs_as_non_root_without_capabilities(shared_box) -> None:
    assert shared_box.exec("id -u", timeout=20).stdout.strip() == "1000"
    status = shared_box.exec("grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status", timeout=20).stdout
    fields = dict(line.split(":\t") for line in status.strip().splitlines())
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapPrm"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"


def test_no_network_by_default(shared_box) -> None:
    r = shared_box.exec(["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), 2)"],
                        timeout=20)
    assert r.returncode != 0
    assert "OSError" in r.stderr or "unreachable" in r.stderr


def test_deadline_kills_the_command_and_its_children(shared_box) -> None:
    start = time.monotonic()
    r = shared_box.exec("sleep 1000 & echo $! > /tmp/bg.pid; sleep 1000", timeout=2)
    assert time.monotonic() - start < 2 + 2.5
    assert r.timed_out and r.killed_reason == "timeout"
    assert shared_box.exec('kill -0 "$(cat /tmp/bg.pid)"', timeout=20).returncode != 0
    assert shared_box.exec("true", timeout=20).returncode == 0


def test_output_cap_truncates_a_huge_print(shared_box) -> None:
    r = shared_box.exec(["python3", "-c", "import sys; sys.stdout.write('x' * 100_000_000)"], timeout=60,
                        output_limit=10_000)
    assert r.returncode == 0 and r.truncated
    assert len(r.stdout) < 10_100 and "bytes truncated" in r.stdout


def test_files_roundtrip(shared_box, tmp_path: Path) -> None:
    shared_box.write_file("notes/a.txt", "first")
    assert shared_box.read_file("notes/a.txt") == b"first"
    assert shared_box.read_file("/workspace/notes/a.txt") == b"first"
    owner = shared_box.exec("stat -c %u notes/a.txt notes", timeout=20).stdout.split()
    assert owner == ["1000", "1000"]
    with pytest.raises(SandboxFileNotFoundError):
        shared_box.read_file("missing.txt")
    with pytest.raises(FileNotFoundError):
        shared_box.read_file("missing.txt")


def test_copy_in_and_out(shared_box, tmp_path: Path) -> None:
    src = tmp_path / "data"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "x.csv").write_text("a,b\n1,2\n")
    shared_box.copy_in(src, "inputs/data")
    r = shared_box.exec("cat inputs/data/sub/x.csv && touch inputs/data/sub/new", timeout=20)
    assert r.returncode == 0 and "1,2" in r.stdout
    shared_box.copy_out("inputs/data", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "x.csv").read_text() == "a,b\n1,2\n"
    assert (tmp_path / "back" / "sub" / "new").exists()
    shared_box.copy_out("hello.txt", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_text() == "hello\n"


def test_workspace_is_copied_and_inputs_are_read_only(sandbox_image, repo: Path, tmp_path: Path,
                                                      run_id: str) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "data.csv").write_text("x\n1\n")
    inputs.chmod(0o777)  # writable by anyone on the host: only the read-only mount may stop the agent
    (inputs / "data.csv").chmod(0o666)
    spec = SandboxSpec(image=sandbox_image, run_id=run_id, read_only_inputs={str(inputs): "/data"})
    with create_sandbox("docker", spec, workspace=repo) as box:
        assert box.exec("python3 src/train.py", timeout=30).stdout == "training\n"
        assert box.exec("echo changed > README.md", timeout=20).returncode == 0
        assert box.exec("cat /data/data.csv", timeout=20).stdout == "x\n1\n"
        w = box.exec("echo y >> /data/data.csv; touch /data/new", timeout=20)
        assert w.returncode != 0 and w.stderr.count("Read-only file system") == 2
        with pytest.raises(SandboxPathError):
            box.write_file("/data/data.csv", "overwritten")
    assert (repo / "README.md").read_text() == "# toy\n"
    assert (inputs / "data.csv").read_text() == "x\n1\n"


def test_write_files_writes_each_file_in_order_in_one_copy(sandbox_image, run_id: str) -> None:
    """The hidden-test relay's request and its `go` mark in one daemon call: both written, owned by the sandbox user,
    the later one only after the earlier one is whole (tar order), so a reader that waits for the mark reads it all."""
    spec = SandboxSpec(image=sandbox_image, run_id=run_id)
    with create_sandbox("docker", spec) as box:
        box.exec("mkdir -p calls", timeout=20)
        payload = b"x" * (3 << 20)
        box.write_files("calls", [("request-1.json", payload), ("go-1", b"")])
        got = box.exec("stat -c '%U %s' calls/request-1.json calls/go-1; id -un", timeout=20).stdout.split("\n")
        assert got[0].split()[1] == str(len(payload)) and got[1].split()[1] == "0"
        assert got[0].split()[0] == got[1].split()[0] == got[2]
        assert box.read_file("calls/request-1.json", max_bytes=len(payload) + 1) == payload


def test_write_folder_creates_the_folder_and_its_files_in_one_copy(sandbox_image, run_id: str, monkeypatch) -> None:
    """The recorder's and the hidden-test worker's files: one daemon call, no failed copy and no `mkdir` first;
    the folder and files are the user's; a name that is a path is refused before anything is written."""
    from failatlas.bench_core.sandbox import docker_sandbox
    from failatlas.bench_core.sandbox.protocol import write_folder

    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        calls: list[str] = []
        put, raw = docker_sandbox.DockerSandbox._put, docker_sandbox.DockerSandbox._raw_exec
        monkeypatch.setattr(docker_sandbox.DockerSandbox, "_put", lambda self, a, d: (calls.append(f"put {d}"),
                                                                                     put(self, a, d))[1])
        monkeypatch.setattr(docker_sandbox.DockerSandbox, "_raw_exec",
                            lambda self, argv, **kw: (calls.append("exec"), raw(self, argv, **kw))[1])
        write_folder(box, ".made", [("a.py", b"print(1)\n"), ("b.json", b"{}")])
        assert calls == ["put /workspace"]
        got = box.exec("stat -c '%U %F' .made .made/a.py .made/b.json; id -un", timeout=20).stdout.split("\n")
        owner = got[3]
        assert got[:3] == [f"{owner} directory", f"{owner} regular file", f"{owner} regular file"], got
        assert box.read_file(".made/a.py") == b"print(1)\n"
        with pytest.raises(ValueError):
            write_folder(box, ".other", [("../escape.py", b"x")])
        assert box.exec("ls -a /workspace", timeout=20).stdout.split() == [".", "..", ".made"]
        # a link planted at the folder's name (the agent's tree carried into a judged one) is replaced, never followed
        box.exec("ln -s /tmp .planted", timeout=20)
        write_folder(box, ".planted", [("a.py", b"1")])
        assert box.exec("stat -c %F .planted", timeout=20).stdout.split() == ["directory"]
        assert box.exec("ls -A /tmp", timeout=20).stdout.split() == []
        assert box.exec("ls -A .planted", timeout=20).stdout.split() == ["a.py"]


def test_memory_limit_kills_a_hog_and_says_oom(sandbox_image, run_id: str) -> None:
    spec = SandboxSpec(image=sandbox_image, memory_mb=256, run_id=run_id)
    with create_sandbox("docker", spec) as box:
        r = box.exec(["python3", "-c", "a = bytearray(2**30); print('survived')"], timeout=60)
        assert r.returncode == 137 and r.killed_reason == "oom" and not r.timed_out
        assert "survived" not in r.stdout
        assert box.exec("echo alive", timeout=20).stdout == "alive\n"


def test_a_later_sandbox_of_the_same_image_skips_the_probe_and_still_tells_oom_apart(sandbox_image, run_id: str,
                                                                                      monkeypatch) -> None:
    """What the probe learns of an image (uid, gid, timeout, GNU tools, HOME) is reused by the next sandbox of the
    same image, user and environment; its counters start at zero, so an OOM in it is still told from a crash."""
    from failatlas.bench_core.sandbox import docker_sandbox

    spec = SandboxSpec(image=sandbox_image, memory_mb=256, run_id=run_id)
    with create_sandbox("docker", spec) as first:
        learnt = (first._uid, first._gid, first._timeout, first._gnu_tools, first._home)
    probes: list[object] = []
    raw = docker_sandbox.DockerSandbox._raw_exec

    def counted(self, argv, **kwargs):
        probes.extend(a for a in argv if "command -v timeout" in a)
        return raw(self, argv, **kwargs)

    monkeypatch.setattr(docker_sandbox.DockerSandbox, "_raw_exec", counted)
    with create_sandbox("docker", spec) as box:
        assert probes == [] and (box._uid, box._gid, box._timeout, box._gnu_tools, box._home) == learnt
        assert box.exec("id -u; echo $HOME", timeout=20).stdout.split() == [str(learnt[0]), learnt[4]]
        crash = box.exec(["python3", "-c", "import os; os.kill(os.getpid(), 9)"], timeout=60)
        assert crash.returncode == 137 and crash.killed_reason is None
        hog = box.exec(["python3", "-c", "a = bytearray(2**30)"], timeout=60)
        assert hog.returncode == 137 and hog.killed_reason == "oom"
    other = SandboxSpec(image=sandbox_image, memory_mb=256, run_id=run_id, env={"HOME": "/tmp/elsewhere"})
    with create_sandbox("docker", other) as box:
        assert len(probes) == 1 and box._home == "/tmp/elsewhere"  # another environment is probed again


HOPPER = """
import os, sys, time
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
for fd in range(256):
    try:
        os.close(fd)
    except OSError:
        pass
while True:  # a new pid every ~2 ms: a walk of /proc never finds it where it was
    time.sleep(0.002)
    if os.fork():
        os._exit(0)
"""


@pytest.mark.parametrize("trace", [False, True], ids=["plain", "traced"])
def test_a_process_that_keeps_changing_its_pid_does_not_outlive_its_command(sandbox_image, run_id: str,
                                                                            trace: bool) -> None:
    """Red team 2026-12-05: a process re-forking every 2 ms outlived the reap (one pass over /proc). With no other
    command running, the reap is one kill(-1) of the user's processes, which no fork escapes."""
    spec = SandboxSpec(image=sandbox_image, run_id=run_id, trace_processes=trace)
    with create_sandbox("docker", spec) as box:
        box.write_file("hopper.py", HOPPER)
        assert box.exec("python3 hopper.py hopper-mark", timeout=30, trace=trace).returncode == 0
        seen = [box._raw_exec(["sh", "-c", "sleep 0.3; ps -eo args"], user="0:0", timeout=20).stdout
                for _ in range(3)]
    assert not any("hopper-mark" in ps for ps in seen), seen


def test_fork_bomb_is_contained_and_reported(sandbox_image, run_id: str) -> None:
    spec = SandboxSpec(image=sandbox_image, pids_limit=48, run_id=run_id)
    with create_sandbox("docker", spec) as box:
        start = time.monotonic()
        r = box.exec("bomb() { bomb | bomb & }; bomb; sleep 30", timeout=6)
        assert time.monotonic() - start < 6 + 8
        assert r.killed_reason == "pids"
        after = box.exec("echo alive", timeout=20)
        assert after.stdout == "alive\n"


def test_labels_and_close_is_idempotent(sandbox_image, run_id: str) -> None:
    client = docker.from_env()
    box = create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id))
    labels = client.containers.get(box.container.id).labels
    assert labels[LABEL] == "1" and labels[LABEL_RUN] == run_id and labels[LABEL_PID].isdigit()
    box.close()
    box.close()
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(box.container.id)
    with pytest.raises(SandboxError):
        box.exec("true", timeout=5)


def test_missing_image_is_an_infrastructure_error() -> None:
    with pytest.raises(SandboxError, match="does not exist") as err:
        create_sandbox("docker", SandboxSpec(image="failatlas/no-such-image:0"))
    assert "failatlas sandbox build-image" in err.value.hint and err.value.exit_code == 6


def test_tracing_wraps_the_docker_backend(shared_box) -> None:
    events: list[SandboxEvent] = []
    traced = TracedSandbox(shared_box, events.append, purpose="validator")
    traced.exec("echo traced; exit 5", timeout=20)
    traced.exec("sleep 100", timeout=1)
    assert [(e.seq, e.exit_code, e.purpose) for e in events][0] == (0, 5, "validator")
    assert events[0].stdout_tail == "traced\n"
    assert events[1].timed_out and events[1].killed_reason == "timeout"


def test_escaped_children_are_killed_by_their_marker(shared_box) -> None:
    start = time.monotonic()
    r = shared_box.exec("setsid sleep 1000 & echo $! > /tmp/esc.pid; wait", timeout=1)
    assert r.timed_out and r.killed_reason == "timeout"
    assert time.monotonic() - start < 1 + 2 + 3
    assert shared_box.exec('kill -0 "$(cat /tmp/esc.pid)"', timeout=20).returncode != 0


def test_unkillable_command_restarts_the_container_keeping_files(sandbox_image, repo: Path,
                                                                 run_id: str) -> None:
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id), workspace=repo) as box:
        box.write_file("kept.txt", "still here")
        box._timeout = ""  # as in an image without coreutils' timeout: only the harness can stop it
        start = time.monotonic()
        r = box.exec(["env", "-i", "/bin/sleep", "1000"], timeout=1)  # env -i drops the marker too
        assert r.timed_out and r.killed_reason == "timeout" and box.restarts == 1
        assert time.monotonic() - start < 1 + 2 + 3 + 10
        assert box.read_file("kept.txt") == b"still here"
        assert box.exec("cat src/train.py", timeout=20).returncode == 0


def test_read_only_root_keeps_workdir_and_tmp_writable(sandbox_image, repo: Path, run_id: str) -> None:
    spec = SandboxSpec(image=sandbox_image, run_id=run_id, read_only_root=True)
    with create_sandbox("docker", spec, workspace=repo) as box:
        r = box.exec("touch /home/agent/x", timeout=20)
        assert r.returncode != 0 and "Read-only file system" in r.stderr
        assert box.exec("touch /tmp/x && echo ok > out.txt && cat src/train.py", timeout=20).returncode == 0
        assert box.read_file("out.txt") == b"ok\n"


def test_copy_out_skips_links_that_escape(shared_box, tmp_path: Path) -> None:
    r = shared_box.exec("mkdir -p esc && ln -sf /etc/passwd esc/abs && ln -sf ../../../../etc esc/up "
                        "&& ln -sf ok.txt esc/rel && echo fine > esc/ok.txt", timeout=20)
    assert r.returncode == 0, r.stderr
    shared_box.copy_out("esc", tmp_path / "esc")
    got = sorted(p.name for p in (tmp_path / "esc").iterdir())
    assert got == ["ok.txt", "rel"] and (tmp_path / "esc" / "rel").read_text() == "fine\n"


def test_gpus_are_requested_by_id_never_all() -> None:
    from failatlas.bench_core.sandbox.docker_sandbox import DockerSandbox

    options = DockerSandbox._run_options(SandboxSpec(gpu_ids=["1", "3"]))
    (request,) = options["device_requests"]
    assert request["DeviceIDs"] == ["1", "3"] and request["Capabilities"] == [["gpu"]]
    assert request.get("Count") in (None, 0)
    assert "device_requests" not in DockerSandbox._run_options(SandboxSpec())

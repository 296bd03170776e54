"""The bwrap sandbox on this host (real bubblewrap, real namespaces): what it isolates, its limits, files in and out,
and the choice of kind when Docker is absent."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SANDBOXES, CopyLimits, SandboxError, SandboxSpec, create_sandbox
from failatlas.bench_core.sandbox.bwrap_select import resolve_sandbox_kind
from failatlas.core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("bwrap_works")


@pytest.fixture
def box(repo: Path):
    with create_sandbox("bwrap", SandboxSpec(memory_mb=512, pids_limit=64, run_id="test-bwrap"),
                        workspace=repo) as sandbox:
        yield sandbox


def test_registered_and_runs_in_the_working_copy(box) -> None:
    assert "bwrap" in SANDBOXES.names()
    res = box.exec("python3 src/train.py; pwd; hostname; id -u", timeout=30)
    assert res.success, res
    assert res.stdout.split() == ["training", "/workspace", "sandbox", "1000"]


def test_namespaces_are_new(box) -> None:
    res = box.exec("readlink /proc/self/ns/user /proc/self/ns/pid /proc/self/ns/ipc /proc/self/ns/uts "
                   "/proc/self/ns/net; echo $$", timeout=30)
    inside = res.stdout.split()
    outside = [os.readlink(f"/proc/self/ns/{n}") for n in ("user", "pid", "ipc", "uts", "net")]
    assert all(a != b for a, b in zip(inside[:5], outside, strict=True)), (inside, outside)
    assert int(inside[5]) < 10  # a fresh PID namespace: the shell is one of its first processes


def test_host_root_read_only_and_only_the_working_copy_writable(box, tmp_path: Path) -> None:
    res = box.exec("for p in /etc/x /usr/x /opt/x /x; do touch $p 2>&1; done; ls /home /root 2>&1; "
                   f"ls {tmp_path} 2>&1; ls /run/docker.sock /var/run/docker.sock 2>&1; "
                   "echo ok > /workspace/w && echo ok > $HOME/h && echo wrote", timeout=30)
    out = res.stdout + res.stderr
    assert out.count("Read-only file system") + out.count("Permission denied") >= 4, out
    assert "wrote" in res.stdout
    assert "cannot access '/root'" in out and f"cannot access '{tmp_path}'" in out
    assert out.count("docker.sock': No such file") == 2
    assert box.exec("ls -A /home", timeout=30).stdout.split() == ["agent"]  # the host's homes are hidden
    assert box.read_file("w") == b"ok\n"


def test_tmp_is_private_and_bounded(repo: Path, tmp_path: Path) -> None:
    marker = Path("/tmp") / f"failatlas-bwrap-host-{os.getpid()}"
    marker.write_text("host")
    try:
        with create_sandbox("bwrap", SandboxSpec(tmp_mb=8), workspace=repo) as box:
            res = box.exec(f"ls {marker} 2>&1; dd if=/dev/zero of=/tmp/fill bs=1M count=32 2>&1",
                           timeout=30)
        assert "No such file" in res.stdout
        assert "No space left on device" in res.stdout
    finally:
        marker.unlink()


def _serve(address: tuple[str, int]) -> tuple[socket.socket, list[str]]:
    server = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET)
    server.bind(address)
    server.listen(5)
    seen: list[str] = []

    def accept() -> None:
        while True:
            try:
                conn, peer = server.accept()
            except OSError:
                return
            seen.append(str(peer))
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    return server, seen


def _host_addresses() -> list[str]:
    import subprocess

    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    return [a for a in out if ":" not in a] or [socket.gethostbyname(socket.gethostname())]


def test_no_network_reaches_host_services(box) -> None:
    """A service on the host's 127.0.0.1 and on its own addresses is unreachable; so is the outside world."""
    targets = ["127.0.0.1", *_host_addresses()]
    servers = [_serve((addr, 0)) for addr in targets]
    try:
        probes = "; ".join(
            f"python3 -c \"import socket; socket.create_connection(('{s.getsockname()[0]}', {s.getsockname()[1]}), "
            f"timeout=3); print('CONNECTED')\" 2>&1 | tail -n 1" for s, _ in servers)
        res = box.exec(probes + "; python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), "
                       "timeout=3)\" 2>&1 | tail -n 1", timeout=60)
        assert "CONNECTED" not in res.stdout
        assert res.stdout.count("Connection refused") + res.stdout.count("unreachable") == len(targets) + 1, res
        assert all(not seen for _, seen in servers)
    finally:
        for s, _ in servers:
            s.close()


def test_another_sandbox_is_out_of_reach(repo: Path) -> None:
    spec = SandboxSpec(memory_mb=512, run_id="test-bwrap-a")
    with create_sandbox("bwrap", spec, workspace=repo) as first, create_sandbox("bwrap", spec, workspace=repo) as other:
        first.write_file("secret.txt", "first run's secret")
        # every file changed in the last 10 minutes anywhere (the secret was just written) is read
        search = ("find / \\( -path /proc -o -path /sys \\) -prune -o -type f -mmin -10 -print0 2>/dev/null "
                  "| xargs -0 -r grep -H \"first run's secret\" 2>/dev/null | head -3")
        assert "first run's secret" in first.exec(search, timeout=60).stdout  # the search finds it where it is
        res = other.exec(f"cat {first.root}/workspace/secret.txt 2>&1; ls {first.root} 2>&1; {search}", timeout=60)
        assert "first run's secret" not in res.stdout, res.stdout
        assert "No such file" in res.stdout


def test_fork_bomb_is_stopped_and_the_sandbox_stays_usable(box) -> None:
    """A bomb whose command stays alive hits the process limit; one whose shell returns at once dies with its PID
    namespace (when it hit the limit first, it says so). Either way nothing is left and the sandbox works."""
    res = box.exec(":(){ :|:& };: ; sleep 30", timeout=20)
    assert res.killed_reason == "pids" and res.duration_s < 15, res
    quick = box.exec(":(){ :|:& };:", timeout=20)
    assert quick.killed_reason in ("pids", None) and quick.duration_s < 5, quick
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith("/bin/bash -c :(){")]
    assert box.exec("echo alive", timeout=30).stdout == "alive\n"


def test_memory_balloon_is_stopped(box) -> None:
    res = box.exec("python3 -c \"a = []\nwhile True: a.append(bytearray(b'x' * 50_000_000))\"", timeout=60)
    assert res.killed_reason == "oom" and not res.success, res
    assert box.exec("echo alive", timeout=30).stdout == "alive\n"


def test_watchdog_stops_memory_across_processes(repo: Path) -> None:
    """RLIMIT_AS binds one process; the watchdog sums the namespace's RSS (here eight 100 MB processes, 256 MB)."""
    with create_sandbox("bwrap", SandboxSpec(memory_mb=256, gpu_ids=[]), workspace=repo) as box:
        res = box.exec("for i in 1 2 3 4 5 6 7 8; do python3 -c \"import time; a = bytearray(100_000_000); "
                       "time.sleep(30)\" & done; wait", timeout=25)
    assert res.killed_reason == "oom", res
    assert res.duration_s < 20


def test_deadline_kills_the_whole_tree(box) -> None:
    mark = f"bwrap-{os.getpid()}-{time.monotonic_ns()}"  # other jobs on this host run loops of their own
    res = box.exec(f"setsid bash -c 'while :; do : {mark}; done' & sleep 1000", timeout=2)
    assert res.timed_out and res.killed_reason == "timeout" and res.duration_s < 5
    assert [p for p in os.listdir("/proc") if p.isdigit() and mark in _cmdline(p)] == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def test_background_processes_end_with_their_command(box) -> None:
    seconds = f"600.{time.monotonic_ns() % 10**9}"  # a sleep no other job on this host runs
    box.exec(f"nohup sleep {seconds} >/dev/null 2>&1 &", timeout=10)
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == f"sleep {seconds}"]


def test_copy_out_drops_links_that_escape(box, tmp_path: Path) -> None:
    box.exec("mkdir -p n && ln -s /etc/passwd abs && ln -s ../../../../etc/passwd rel && ln -s n/../../x k "
             "&& ln -s ../.. n/up && echo data > f && ln -s f inside", timeout=30)
    report = box.copy_out("/workspace", tmp_path / "out", limits=CopyLimits())
    out = tmp_path / "out"
    assert (out / "inside").resolve() == (out / "f").resolve()
    for name in ("abs", "rel", "n/up"):
        assert not os.path.lexists(out / name), name
    assert {c.path for c in report.cut} >= {"abs", "rel", "n/up"}


def test_a_planted_link_cannot_redirect_a_write(box, tmp_path: Path) -> None:
    from failatlas.bench_core.sandbox import SandboxPathError

    target = tmp_path / "victim"
    target.mkdir()
    box.exec(f"ln -s {target} out", timeout=30)
    with pytest.raises(SandboxPathError, match="File exists"):  # the link leads nowhere inside the sandbox
        box.write_file("out/pwned.txt", "x")
    with pytest.raises(SandboxPathError, match="File exists"):
        box.copy_in(Path(__file__), "out/pwned.py")
    box.exec("ln -s /etc/hosts hosts", timeout=30)
    box.write_file("hosts", "pwned")  # replaces the link inside the sandbox: the host's file is not reached
    assert "pwned" not in Path("/etc/hosts").read_text()
    assert list(target.iterdir()) == []


def test_read_file_refuses_links(box) -> None:
    from failatlas.bench_core.sandbox import SandboxPathError

    box.exec("ln -s /etc/hostname h", timeout=30)
    with pytest.raises(SandboxPathError):
        box.read_file("h")


def test_read_only_inputs_are_bound_read_only(repo: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.csv").write_text("1,2\n")
    spec = SandboxSpec(read_only_inputs={str(data): "/data"})
    with create_sandbox("bwrap", spec, workspace=repo) as box:
        res = box.exec("cat /data/x.csv; echo y > /data/y 2>&1; echo exit=$?", timeout=30)
    assert res.stdout.startswith("1,2\n") and "exit=1" in res.stdout


def test_the_full_network_policy_is_refused(repo: Path) -> None:
    with pytest.raises(SandboxError, match="no network but none"):
        create_sandbox("bwrap", SandboxSpec(network="full"), workspace=repo)


def test_no_gpu_leased_means_no_nvidia_node(box) -> None:
    res = box.exec("ls /dev | grep -c nvidia; echo CUDA=$CUDA_VISIBLE_DEVICES", timeout=30)
    assert res.stdout.split() == ["0", "CUDA="]


def test_closing_removes_everything(repo: Path) -> None:
    box = create_sandbox("bwrap", SandboxSpec(), workspace=repo)
    box.exec("mkdir -p locked/deep && touch locked/deep/f && chmod 0 locked/deep locked", timeout=30)
    box.close()
    assert not box.root.exists()
    box.close()


def test_auto_takes_bwrap_when_docker_is_absent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    said: list[str] = []
    assert resolve_sandbox_kind("auto", say=said.append) == "bwrap"
    assert len(said) == 1 and "Docker is not reachable" in said[0] and "bwrap" in said[0]
    assert resolve_sandbox_kind("bwrap", say=said.append) == "bwrap"  # a named kind is kept, silently
    assert len(said) == 1
    # local is kept too, with the one line that its runs are unisolated (bench report and show mark them)
    assert resolve_sandbox_kind("local", say=said.append) == "local"
    assert len(said) == 2 and said[1].startswith("sandbox: local: ") and "unisolated" in said[1]


def test_auto_never_falls_back_to_local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    monkeypatch.setenv("FAILATLAS_BWRAP", str(tmp_path / "no-bwrap"))
    with pytest.raises(ConfigError, match="no sandbox can be made here"):
        resolve_sandbox_kind(None)

"""A judge forked by the server (`judge_start.py`) starts as a fresh `python3 -I -B` process would: the same
descriptors, limit, folder, environment and arguments; kills and exit statuses read the same; a dead server costs
no judge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failatlas.bench_core.hidden import judge_start
from failatlas.bench_core.hidden.judge_start import UNKNOWN_EXIT, ForkedJudge, start_judge

MEMORY = 3 * 1024 * 1024 * 1024

REPORT = r'''
import json, os, random, resource, signal, sys
out = int(sys.argv[1])
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
info = {
    "argv": sys.argv[3:], "cwd": os.getcwd(), "limit": resource.getrlimit(resource.RLIMIT_AS)[0],
    "env": dict(os.environ), "session_leader": os.getsid(0) == os.getpid(), "name": __name__,
    "open": len([fd for fd in fds if fd not in (int(sys.argv[1]), int(sys.argv[2]))]),
    "stdin": os.readlink("/proc/self/fd/0"), "path0": sys.path[0] if sys.path else "",
    "isolated": sys.flags.isolated, "bytecode": sys.dont_write_bytecode,
    "pytest_loaded": "pytest" in sys.modules, "in_open": int(sys.argv[2]) in fds, "random": random.random(),
    "numpy_loaded": "numpy" in sys.modules,
    "sigint": getattr(signal.getsignal(signal.SIGINT), "__name__", str(signal.getsignal(signal.SIGINT))),
    "sigpipe": str(signal.getsignal(signal.SIGPIPE)), "pgid_is_sid_leader": os.getpgid(0) == os.getpid(),
}
import numpy
info["np_random"] = float(numpy.random.random())
print("to the log")
os.write(out, json.dumps(info).encode())
sys.exit(int(sys.argv[4]))
'''


def _run(tmp_path: Path, fork: bool, code: int = 0) -> tuple[dict, int, str]:
    script = tmp_path / "judge.py"
    script.write_text(REPORT)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    log = tmp_path / f"log-{fork}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0", "FAILATLAS_TEST_MARK": "x"}
    with open(log, "wb") as handle:
        proc = start_judge(sys.executable, script, ["tests-folder", str(code)], (out_w, in_r), log=handle.fileno(),
                           cwd=work, env=env, memory=MEMORY, fork=fork)
    os.close(out_w)
    os.close(in_r)
    assert isinstance(proc, ForkedJudge) is fork
    data = b""
    while chunk := os.read(out_r, 65536):
        data += chunk
    os.close(out_r)
    os.close(in_w)
    status = proc.wait(timeout=30)
    return json.loads(data), status, log.read_text()


def test_a_forked_judge_starts_as_a_fresh_process_would(tmp_path: Path) -> None:
    forked, forked_status, forked_log = _run(tmp_path, fork=True, code=3)
    fresh, fresh_status, fresh_log = _run(tmp_path, fork=False, code=3)
    assert forked_status == fresh_status == 3
    assert forked_log == fresh_log == "to the log\n"
    for key in ("argv", "cwd", "limit", "env", "session_leader", "name", "stdin", "isolated", "bytecode",
                "in_open", "sigint", "sigpipe", "pgid_is_sid_leader"):
        assert forked[key] == fresh[key], key
    assert forked["limit"] == MEMORY
    assert forked["argv"] == ["tests-folder", "3"]
    assert forked["session_leader"] is False  # in the harness's session and process group: a Ctrl-C reaches it
    assert forked["sigint"] == "default_int_handler"
    # stdin, stdout, stderr and the listing's own descriptor: nothing else leaked into either
    assert forked["open"] == fresh["open"] == 4, (forked, fresh)
    assert forked["pytest_loaded"] is True and fresh["pytest_loaded"] is False
    again, _, _ = _run(tmp_path, fork=True)
    assert again["random"] != forked["random"]  # each judge's own random state, not a copy of the server's
    assert forked["numpy_loaded"] is True and fresh["numpy_loaded"] is False  # imported once, by the server
    assert again["np_random"] != forked["np_random"]  # numpy's global generator too
    assert forked["path0"] != str(Path(judge_start.SERVER).parent)  # -I: the server's folder is not on the path


SLEEPER = "import sys, time\ntime.sleep(float(sys.argv[3]))\n"


def _sleeper(tmp_path: Path, seconds: float, fork: bool = True):
    script = tmp_path / "sleep.py"
    script.write_text(SLEEPER)
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    with open(tmp_path / "sleep.log", "wb") as handle:
        proc = start_judge(sys.executable, script, [str(seconds)], (out_w, in_r), log=handle.fileno(),
                           cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, memory=MEMORY, fork=fork)
    for fd in (out_r, out_w, in_r, in_w):
        os.close(fd)
    return proc


@pytest.mark.parametrize("fork", [True, False])
def test_kill_wait_and_poll_read_as_popen_does(tmp_path: Path, fork: bool) -> None:
    proc = _sleeper(tmp_path, 60, fork)
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    proc.kill()
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert proc.poll() == -signal.SIGKILL
    proc.kill()  # a second kill of an ended judge is harmless


def test_a_dead_server_loses_no_judge_and_is_replaced(tmp_path: Path) -> None:
    proc = _sleeper(tmp_path, 1.0)
    assert isinstance(proc, ForkedJudge)
    server = judge_start._server(sys.executable, {"PATH": "/usr/bin:/bin"})
    assert server is not None
    server.proc.kill()
    server.proc.wait()
    started = time.monotonic()
    assert proc.wait(timeout=30) in (0, UNKNOWN_EXIT)  # still seen to end, through its pidfd
    assert time.monotonic() - started < 10
    deadline = time.monotonic() + 10
    while server.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.alive
    again = _sleeper(tmp_path, 0)
    assert isinstance(again, ForkedJudge)  # a new server
    assert again.wait(timeout=30) == 0
    assert judge_start._server(sys.executable, {"PATH": "/usr/bin:/bin"}) is not server


def test_a_python_that_cannot_serve_starts_fresh_processes(tmp_path: Path) -> None:
    """A Python whose server ends before it is ready (a stand-in that refuses to run judge_fork.py, as one without
    pytest would fail its import) gets fresh processes, and is not asked again."""
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\ncase "$3" in *judge_fork.py) exit 1;; esac\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    script = tmp_path / "sleep.py"
    script.write_text(SLEEPER)
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    with open(tmp_path / "sleep.log", "wb") as handle:
        proc = start_judge(str(python), script, ["0"], (out_w, in_r), log=handle.fileno(), cwd=tmp_path,
                           env={"PATH": "/usr/bin:/bin"}, memory=MEMORY)
    for fd in (out_r, out_w, in_r, in_w):
        os.close(fd)
    assert isinstance(proc, subprocess.Popen)
    assert proc.wait(timeout=30) == 0
    assert judge_start._SERVERS[(str(python), (("PATH", "/usr/bin:/bin"),))] is None


def test_the_server_ends_with_the_harness_and_is_reaped_by_it(tmp_path: Path) -> None:
    """A harness process that ran a judge ends its server and reaps it on the way out (so none outlives it, and
    the server's CPU time, its judges' included, is in the harness's children's time as a fresh judge's was)."""
    code = f"""
import atexit, resource, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
seen = {{}}
def after():  # registered before judge_start's own handler, so it runs after it
    server = seen["server"]
    print("returncode", server.proc.returncode, "children_cpu", resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime)
atexit.register(after)
from pathlib import Path
from failatlas.bench_core.hidden import judge_start
from tests.bench_core.hidden.test_judge_start import _sleeper
proc = _sleeper(Path({str(tmp_path)!r}), 0)
assert isinstance(proc, judge_start.ForkedJudge)
assert proc.wait(timeout=30) == 0
seen["server"] = judge_start._server(sys.executable, {{"PATH": "/usr/bin:/bin"}})
print("before", resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    words = out.stdout.split()
    assert words[words.index("returncode") + 1] == "0", out.stdout  # it read EOF and exited, and was reaped
    assert float(words[words.index("children_cpu") + 1]) > float(words[words.index("before") + 1]), out.stdout


def test_a_server_that_ends_after_taking_a_request_starts_no_second_judge(tmp_path: Path) -> None:
    """Once the request reached the server, a judge it forked may hold the pipes: when the server then ends without
    a reply, the caller hears it (JudgeStartError) instead of a fresh judge starting on the same pipes."""
    fake = tmp_path / "fake_server.py"
    fake.write_text("import socket, sys\nsock = socket.socket(fileno=int(sys.argv[1]))\n"
                    "sock.send(b'{\"ready\": true}')\nsocket.recv_fds(sock, 65536, 3)\n")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\ncase "$3" in *judge_fork.py) exec {sys.executable} -I -B {fake} "$4";; esac\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    script = tmp_path / "ran.py"
    script.write_text("print('ran')\n")
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    try:
        with open(tmp_path / "sleep.log", "wb") as handle, pytest.raises(judge_start.JudgeStartError):
            start_judge(str(python), script, ["0"], (out_w, in_r), log=handle.fileno(), cwd=tmp_path,
                        env={"PATH": "/usr/bin:/bin"}, memory=MEMORY)
    finally:
        for fd in (out_r, out_w, in_r, in_w):
            os.close(fd)
    assert not (tmp_path / "sleep.log").read_bytes()  # no fresh judge ran on them either


def test_servers_for_ever_new_environments_are_bounded_and_a_busy_one_is_kept(tmp_path: Path) -> None:
    """A judge environment that changes from call to call (a HOME per test) leaves at most MAX_SERVERS servers
    alive; one whose judge still runs is not ended under it."""
    busy = _sleeper(tmp_path, 30)  # a judge of the {"PATH": ...} server, still running
    assert isinstance(busy, ForkedJudge)
    kept = judge_start._server(sys.executable, {"PATH": "/usr/bin:/bin"})
    for n in range(judge_start.MAX_SERVERS + 2):
        assert judge_start._server(sys.executable, {"PATH": "/usr/bin:/bin", "HOME": f"/home/{n}"}) is not None
    live = [s for s in judge_start._SERVERS.values() if s is not None and s.alive]
    assert len(live) <= judge_start.MAX_SERVERS + 1  # the busy one may stay beyond the bound
    assert kept.alive and kept in live
    busy.kill()
    assert busy.wait(timeout=10) == -signal.SIGKILL


def test_a_pristine_module_named_like_a_preloaded_one_is_the_judge_s_import(tmp_path: Path) -> None:
    """A fresh judge, with the pristine repository first on its path, imports the task's own `signal.py` or
    `resource.py`; a forked one must too, although the server imported the standard library's."""
    pristine = tmp_path / "pristine"
    (pristine / "calendar").mkdir(parents=True)
    (pristine / "signal.py").write_text("TASK = 'signal'\n")
    (pristine / "resource.py").write_text("TASK = 'resource'\n")
    (pristine / "calendar" / "__init__.py").write_text("TASK = 'calendar'\n")
    (pristine / "os.py").write_text("TASK = 'os'\n")  # a fresh interpreter holds os before any path is read
    script = tmp_path / "imports.py"
    script.write_text(f"import os, sys\nsys.path.insert(0, {str(pristine)!r})\n"
                      "import signal, resource, calendar\nimport os as again\n"
                      "said = ' '.join(m.TASK for m in (signal, resource, calendar)) + f' {again is os}'\n"
                      "os.write(int(sys.argv[1]), said.encode())\n")
    for fork in (False, True):
        out_r, out_w = os.pipe()
        in_r, in_w = os.pipe()
        with open(tmp_path / "imports.log", "wb") as handle:
            proc = start_judge(sys.executable, script, [], (out_w, in_r), log=handle.fileno(), cwd=tmp_path,
                               env={"PATH": "/usr/bin:/bin"}, memory=MEMORY, fork=fork, path_first=[pristine])
        os.close(out_w)
        os.close(in_r)
        said = os.read(out_r, 1000)
        os.close(out_r)
        os.close(in_w)
        assert proc.wait(timeout=30) == 0, (tmp_path / "imports.log").read_text()
        assert said == b"signal resource calendar True", (fork, said)


def test_a_judge_s_exit_text_and_setup_failure_are_in_its_log(tmp_path: Path) -> None:
    """`sys.exit("why")` prints its text and exits 1, as the interpreter does; a folder that is gone is a
    traceback in the log and exit 1, which the relay reads as a judge that ended without a result."""
    script = tmp_path / "says.py"
    script.write_text("import sys\nsys.exit('the judge says why it stopped')\n")
    for cwd, expect in ((tmp_path, "the judge says why it stopped"), (tmp_path / "gone", "FileNotFoundError")):
        out_r, out_w = os.pipe()
        in_r, in_w = os.pipe()
        with open(tmp_path / "says.log", "wb") as handle:
            proc = start_judge(sys.executable, script, [], (out_w, in_r), log=handle.fileno(), cwd=cwd,
                               env={"PATH": "/usr/bin:/bin"}, memory=MEMORY)
        for fd in (out_r, out_w, in_r, in_w):
            os.close(fd)
        assert isinstance(proc, ForkedJudge)
        assert proc.wait(timeout=30) == 1
        assert expect in (tmp_path / "says.log").read_text()


def test_a_server_whose_harness_ends_kills_the_judges_it_forked(tmp_path: Path) -> None:
    """A harness interrupted mid-judge (its end of the socket closed): the server kills the judges it has not
    reaped before it exits, so none runs on after the harness."""
    proc = _sleeper(tmp_path, 60)
    assert isinstance(proc, ForkedJudge)
    server = judge_start._server(sys.executable, {"PATH": "/usr/bin:/bin"})
    with judge_start._SERVERS_LOCK:
        judge_start._SERVERS.pop((sys.executable, (("PATH", "/usr/bin:/bin"),)), None)
    server.close()
    assert server.proc.returncode == 0  # it read EOF and exited by itself
    assert proc.wait(timeout=10) in (-signal.SIGKILL, UNKNOWN_EXIT)
    assert not Path(f"/proc/{proc.pid}").exists() or "Z" in Path(f"/proc/{proc.pid}/stat").read_text().split()[2]

"""Red-team findings 3 and 4 against issue 29 (/work/coord/REDTEAM.md): the hidden-test exchange never hangs and
anything the agent's traffic does to it is the agent's I failure, never `judge_failed`.

The judge runs for real (`hidden.run_judge`, a host process) with its calls relayed to a real `local` sandbox holding
a tiny agent module; the attacks are the red team's (a reply line of invalid UTF-8 or past the cap on the worker's
own reply handle, a flood of tiny JSON values), and the boundary rule (a judge failing before the agent's first
reply is the harness's, after it the agent's) is checked on both sides.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from failatlas.bench_core.hidden import JudgeError, relay, run_judge, wire
from failatlas.bench_core.hidden import zygote as zygote_module
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.sandbox.model import ExecResult

# walks the frames up to the worker's reply handle and writes its own reply line there (dos_reply.sh); under the
# zygote, writes the call's reply file itself, or over a channel its reply pipe
FLOOD = '''
def _flood(payload):
    import os, sys
    f = sys._getframe()
    while f is not None:
        r = f.f_locals.get("reply")
        if hasattr(r, "fileno"):
            os.write(r.fileno(), b"FAILATLAS_REPLY " + payload + b"\\n")
            os._exit(0)
        if isinstance(f.f_locals.get("reply_fd"), int):  # the zygote over a channel: the call's reply pipe
            data = memoryview(payload)
            while data:
                data = data[os.write(f.f_locals["reply_fd"], data):]
            os._exit(0)
        if "folder" in f.f_locals and "number" in f.f_locals:
            with open(os.path.join(f.f_locals["folder"], f"reply-{f.f_locals['number']}.json"), "wb") as h:
                h.write(payload)
            os._exit(0)
        f = f.f_back


def invalid_utf8():
    _flood(b"\\xff" * (1024 * 1024))


def invalid_utf8_flood():
    _flood(b"\\xff" * (48 * 1024 * 1024))


def past_the_cap():
    _flood(b"[" + b"0," * (9 * 1024 * 1024) + b"0]")


def many_values():
    _flood(b"[" + b"{}," * (4 * 1024 * 1024) + b"{}]")


def fine():
    return 2
'''
TESTS = '''
import pytest
from failatlas_hidden import AgentError


@pytest.mark.parametrize("name", ["invalid_utf8", "invalid_utf8_flood", "past_the_cap", "many_values"])
def test_flood(agent, name):
    agent.call("mod:" + name)


def test_after_the_floods_the_channel_is_in_step(agent):
    assert agent.call("mod:fine") == 2
'''


def _judge(tmp_path: Path, tests: str, timeout_s: float = 120.0, *, kind: str = "local", image: str | None = None,
           module: str = FLOOD):
    work = tmp_path / "work"
    work.mkdir()
    (work / "mod.py").write_text(module)
    test_file = tmp_path / "test_hidden.py"
    test_file.write_text(tests)
    spec = SandboxSpec(memory_mb=2048, **({"image": image} if image else {}))
    with create_sandbox(kind, spec, workspace=work) as box:
        start = time.monotonic()
        run = run_judge([test_file], box, pristine=None, timeout_s=timeout_s)
        return run, time.monotonic() - start


def _count_channel_calls(monkeypatch) -> list[int]:
    numbers: list[int] = []
    call = zygote_module.ChannelZygote.call

    def counted(self, number, payload, left):
        numbers.append(number)
        return call(self, number, payload, left)

    monkeypatch.setattr(zygote_module.ChannelZygote, "call", counted)
    return numbers


# the call's process reaches the zygote's own stdin and stdout through /proc (the same user) and writes into them
CORRUPT = '''
def corrupt():
    import os
    zygote = os.getppid()
    hit = 0
    for fd in os.listdir(f"/proc/{zygote}/fd"):
        try:
            if os.readlink(f"/proc/{zygote}/fd/{fd}").startswith("pipe:"):
                with open(f"/proc/{zygote}/fd/{fd}", "wb", buffering=0) as handle:
                    handle.write(b"not a frame " * 100)
                hit += 1
        except OSError:
            pass
    return hit


def fine(x):
    return 2 * x
'''

CORRUPT_TESTS = '''
def test_before(agent):
    assert agent.call("mod:fine", 1) == 2


def test_corrupt(agent):
    agent.call("mod:corrupt")


def test_after(agent):
    assert [agent.call("mod:fine", i) for i in range(3)] == [0, 2, 4]
'''


@pytest.mark.docker
def test_a_call_that_writes_into_the_zygotes_channel_fails_itself_and_the_exchange_goes_on(
        tmp_path, monkeypatch, sandbox_image):
    """Over a channel, the agent's process can reach the zygote's stdin and stdout through /proc: what it writes
    there fails its own call (typed, the agent's), the zygote is dropped, and later calls run one process each."""
    over_channel = _count_channel_calls(monkeypatch)
    run, took = _judge(tmp_path, CORRUPT_TESTS, kind="docker", image=sandbox_image, module=CORRUPT, timeout_s=60)
    assert run.passed == ["test_before", "test_after"] and run.problems == [] and not run.agent_fault
    assert [f["test"] for f in run.failures] == ["test_corrupt"]
    assert run.failures[0]["exception"] in ("MalformedReply", "NoReply"), run.failures[0]
    assert over_channel == [1, 2]  # the corrupted channel is not used again
    assert took < 60


# red team against the channel (2026-12-05): a call holds the zygote's stdout open through /proc, so the channel's
# output does not end when the zygote does, and starves the container's CPU with processes that carry no marker
HOLD_AND_STARVE = '''
import os, time


def f(x):
    out = os.open(f"/proc/{os.getppid()}/fd/4", os.O_WRONLY)
    os.set_inheritable(out, True)
    for _ in range(40):
        if os.fork() == 0:
            os.setsid()
            os.execve("/bin/sh", ["sh", "-c", "while :; do :; done"], {})
    time.sleep(3600)
'''


@pytest.mark.docker
def test_a_call_that_holds_the_channel_and_starves_the_container_ends_by_the_deadline(tmp_path, sandbox_image):
    """Closing the channel neither waits for output the agent's processes hold open nor chains kills that cannot
    run in a container they starve (each kill that overruns restarts the container instead); the hidden tests end
    within their deadline plus the grace, and nothing the call started is left."""
    tests = "def test_one(agent):\n    assert agent.call('mod:f', 3) == 6\n"
    work = tmp_path / "work"
    work.mkdir()
    (work / "mod.py").write_text(HOLD_AND_STARVE)
    (tmp_path / "test_hidden.py").write_text(tests)
    spec = SandboxSpec(image=sandbox_image, memory_mb=2048)
    with create_sandbox("docker", spec, workspace=work) as box:
        start = time.monotonic()
        run = run_judge([tmp_path / "test_hidden.py"], box, pristine=None, timeout_s=10)
        took = time.monotonic() - start
        left = box._raw_exec(["ps", "-eo", "args"], user="0:0", timeout=30).stdout
    assert run.failures[0]["exception"] == "Timeout" and not run.passed
    assert took < 10 + relay.JUDGE_GRACE_S, took
    assert "while :" not in left, left


@pytest.mark.parametrize("kind", ["local", pytest.param("docker", marks=pytest.mark.docker)])
@pytest.mark.parametrize("planted", ["file", "link"])
def test_a_tree_holding_the_workers_name_cannot_pass_for_the_harness_failing(tmp_path, request, kind, planted):
    """A file or link at the worker folder's old fixed name (`.failatlas-hidden`, and any guess at the new
    prefix) made the harness's first write fail before any of the agent's code ran: `judge_failed`, the run out
    of I's denominator. The folder is named afresh per exchange, so the calls run."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "mod.py").write_text("def f(x):\n    return 2 * x\n")
    for name in (".failatlas-hidden", ".failatlas-hidden-0", zygote_module.WORKER_PREFIX):
        if planted == "file":
            (work / name).write_text("planted\n")
        else:
            (work / name).symlink_to("/etc")
    (tmp_path / "test_hidden.py").write_text("def test_one(agent):\n    assert agent.call('mod:f', 3) == 6\n")
    image = request.getfixturevalue("sandbox_image") if kind == "docker" else None
    spec = SandboxSpec(memory_mb=1024, **({"image": image} if image else {}))
    with create_sandbox(kind, spec, workspace=work) as box:
        run = run_judge([tmp_path / "test_hidden.py"], box, pristine=None, timeout_s=30)
    assert run.passed == ["test_one"] and run.failures == [] and run.problems == []


def test_a_zygote_slow_to_start_never_takes_the_calls_time(tmp_path):
    """Red team 2026-12-05: 45 files of 1 MB of Python held the zygote's start (it reads the working copy's imports)
    for its whole 120 s, and the first call then still had the whole deadline. The zygote reads at most 4 MB of
    source, never waits past the deadline, and the first call has what is left."""
    work = tmp_path / "work"
    (work / "big").mkdir(parents=True)
    body = "x = [" + "1, " * 330_000 + "]\n"
    for n in range(45):
        (work / "big" / f"m{n}.py").write_text(body)
    (work / "mod.py").write_text("def f(x):\n    return 2 * x\n")
    (tmp_path / "test_hidden.py").write_text("def test_one(agent):\n    assert agent.call('mod:f', 3) == 6\n")
    with create_sandbox("local", SandboxSpec(memory_mb=4096), workspace=work) as box:
        start = time.monotonic()
        run = run_judge([tmp_path / "test_hidden.py"], box, pristine=None, timeout_s=20)
        took = time.monotonic() - start
    assert run.passed == ["test_one"] and run.problems == [], (run.failures, run.problems)
    assert took < 20, took


@pytest.mark.parametrize("mode", ["zygote", "per-call", pytest.param("channel", marks=pytest.mark.docker)])
def test_floods_on_the_reply_handle_fail_their_calls_and_the_exchange_goes_on(tmp_path, monkeypatch, request, mode):
    """hang2.sh / dos_reply.sh hung `bench score` forever (80 MiB of \\xff, re-encoded to 3 bytes each, past the
    judge's frame limit); each flood is now the agent's failed call, typed, through the zygote (over files in a
    local sandbox, over a channel in Docker) or one process per call (the red team forced the latter by killing
    the zygote)."""
    if mode == "per-call":
        monkeypatch.setattr(zygote_module, "ZYGOTE_START_S", 0.0)
    image = request.getfixturevalue("sandbox_image") if mode == "channel" else None
    over_channel = _count_channel_calls(monkeypatch)
    run, took = _judge(tmp_path, TESTS, kind="docker" if mode == "channel" else "local", image=image)
    assert len(over_channel) == (5 if mode == "channel" else 0)  # every call went through the kind's way
    zygote = mode != "per-call"
    assert run.passed == ["test_after_the_floods_the_channel_is_in_step"] and run.problems == []
    kinds = {f["test"]: (f["exception"], f["message"]) for f in run.failures}
    assert kinds["test_flood[invalid_utf8]"][0] == ("UnplainResult" if zygote else "MalformedReply")
    # under the zygote the agent writes the reply file itself, not atomically: the relay may read it half written
    # (not plain data) or whole (past the cap); either is the agent's failed call
    flooded = {"ReplyTooLarge", "UnplainResult"} if mode == "zygote" else {"ReplyTooLarge"}
    assert kinds["test_flood[invalid_utf8_flood]"][0] in flooded
    assert kinds["test_flood[past_the_cap]"][0] in flooded
    assert kinds["test_flood[many_values]"][0] == "UnplainResult"
    # whole, the flood is refused for its count of values; read half written under the zygote (a loaded full run
    # did), it is not plain data: the same type, either way the agent's failed call
    message = kinds["test_flood[many_values]"][1]
    assert "values is more than" in message or (mode == "zygote" and message.startswith("not plain data")), message
    assert took < 120


def test_a_judge_that_dies_after_a_reply_is_the_agents_failure_and_before_any_the_harness(tmp_path):
    """optout2.sh/optout3.sh: the judge ending mid-exchange made I `judge_failed` (out of the denominator)."""
    after = "import os\n\n\ndef test_one(agent):\n    agent.call('mod:fine')\n    os._exit(3)\n"
    run, _ = _judge(tmp_path, after)
    assert run.calls == 1 and not run.ok and run.total == 0
    assert len(run.problems) == 1 and "stopped while handling the agent's replies" in run.problems[0]
    before = tmp_path / "before"
    before.mkdir()
    with pytest.raises(JudgeError, match="ended"):
        _judge(before, "import os\n\nos._exit(3)\n")


def test_a_judge_that_stops_reading_ends_the_exchange_by_the_deadline(tmp_path, monkeypatch):
    """No write waits forever: a judge that never reads its reply ends the run within deadline plus grace."""
    monkeypatch.setattr(relay, "JUDGE_GRACE_S", 3.0)
    monkeypatch.setattr(relay, "REPLY_LIMIT", 64 * 1024 * 1024)  # more than a pipe holds, so the write blocks
    monkeypatch.setattr(relay._Relay, "call", lambda self, payload: b"x" * (4 * 1024 * 1024))
    stuck = "import time\n\n\ndef test_one(agent):\n    import failatlas_hidden as h\n" \
            "    h._CHANNEL.send(h.CALL, b'{}')\n    time.sleep(600)\n"
    run, took = _judge(tmp_path, stuck, timeout_s=5.0)
    assert run.problems and "did not read a reply in time" in run.problems[0]
    assert took < 5.0 + 3.0 + 20


def test_the_reply_is_relayed_as_ascii_bytes_never_reencoded():
    ok = ExecResult(command="w", returncode=0, duration_s=0.1, stdout='FAILATLAS_REPLY {"ok":true,"value":1}\n')
    assert relay._reply(ok) == b'{"ok":true,"value":1}'
    bad = ExecResult(command="w", returncode=0, duration_s=0.1, stdout="FAILATLAS_REPLY " + "\ufffd" * 10 + "\n")
    assert b"MalformedReply" in relay._reply(bad)
    cut = ExecResult(command="w", returncode=0, duration_s=0.1, stdout='FAILATLAS_REPLY {"ok":true}\n', truncated=True)
    assert b"ReplyTooLarge" in relay._reply(cut)
    assert relay.REPLY_LIMIT == wire.MAX_BYTES == 16 * 1024 * 1024


def test_the_judge_drops_an_oversized_frame_and_stays_in_step(tmp_path):
    """A frame past the judge's limit is read to its end and fails its call; the next frame is read whole."""
    import importlib
    import sys

    folder = tmp_path / "judge"
    relay.stage([], folder)
    sys.path.insert(0, str(folder))
    try:
        fixture = importlib.import_module("failatlas_hidden")
        read_fd, write_fd = os.pipe()
        size = fixture.MAX_FRAME + 10

        def write() -> None:
            os.write(write_fd, fixture.HEADER.pack(b"R", size))
            left = size
            while left:
                left -= os.write(write_fd, b"x" * min(left, 1 << 20))
            os.write(write_fd, fixture.HEADER.pack(b"R", 2) + b"42")

        writer = threading.Thread(target=write)
        writer.start()
        channel = fixture.Channel(-1, read_fd)
        with pytest.raises(fixture.AgentError, match="ReplyTooLarge"):
            channel.receive("mod:f")
        assert channel.receive("mod:f") == b"42"
        writer.join()
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("failatlas_hidden", None)
        sys.modules.pop("failatlas_wire", None)


def test_wire_refuses_a_flood_of_values_before_parsing_it():
    data = b"[" + b"{}," * 2_000_000 + b"{}]"
    start = time.process_time()
    with pytest.raises(wire.WireError, match="values is more than"):
        wire.decode(data)
    assert time.process_time() - start < 5  # a sanity bound: counting bytes, not building 2M dicts
    assert wire.decode(b"[" + b"1," * 1000 + b"1]") == [1] * 1001

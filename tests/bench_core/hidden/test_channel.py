"""The channel to a command's stdin and stdout (`sandbox/channel.py`) and the hidden-test zygote over it
(`hidden/zygote.py`): every read and write bounded, and a broken Docker stream never answers a call as the
agent's failure. Real processes and a real Docker sandbox with the real judge."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from failatlas.bench_core.hidden import relay, run_judge
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox, docker_stream
from failatlas.bench_core.sandbox.channel import Channel, ChannelError, start_pump


def _process_channel(argv: list[str], limit: int = 1 << 20) -> Channel:
    """A channel over a local process's pipes, fed as a sandbox kind feeds one."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)

    def chunks():
        while chunk := os.read(proc.stdout.fileno(), 65536):
            yield chunk, None

    def stop() -> None:
        proc.kill()
        proc.wait()

    channel = Channel(limit, write=proc.stdin.write, end_input=proc.stdin.close, stop=stop)
    start_pump(channel, chunks())
    return channel


def test_what_is_sent_comes_back_and_the_end_reads_short():
    channel = _process_channel(["cat"])
    channel.send(b"frame one", until=time.monotonic() + 5)
    assert channel.read(9, until=time.monotonic() + 5) == b"frame one"
    channel.close()
    assert channel.ended and channel.broken is None
    assert channel.read(1, until=time.monotonic() + 1) == b""


def test_a_read_waits_only_until_its_deadline():
    channel = _process_channel(["sleep", "30"])
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        channel.read(1, until=start + 0.3)
    assert time.monotonic() - start < 5
    channel.close(grace=0.1)


def test_output_past_the_limit_is_refused_not_buffered():
    channel = _process_channel(["yes"], limit=4096)
    with pytest.raises(ChannelError, match="more than 4096 bytes"):
        while True:
            channel.read(4096, until=time.monotonic() + 5)
    channel.close(grace=0.1)


def test_a_command_that_does_not_read_its_stdin_fails_the_send_by_its_deadline():
    channel = _process_channel(["sleep", "30"])
    start = time.monotonic()
    with pytest.raises(ChannelError, match="did not read"):
        channel.send(b"x" * (16 * 1024 * 1024), until=start + 1.0)
    assert time.monotonic() - start < 5
    channel.close(grace=0.1)  # frees the blocked writer


MODULE = "def f(x):\n    return 2 * x\n"
TESTS = """
def test_calls(agent):
    assert [agent.call("mod:f", i) for i in range(3)] == [0, 2, 4]
"""


@pytest.mark.docker
def test_a_broken_docker_stream_is_not_the_agents_failure(tmp_path, monkeypatch, sandbox_image):
    """The Docker API stream breaking under the channel (docker_stream's ExecStreamBroken) leaves the call
    unanswered by the zygote; the relay runs it, and the later calls, one process each: all pass."""
    attached = docker_stream.exec_attached
    broke = threading.Event()

    def breaking(api, exec_id):
        sock, chunks = attached(api, exec_id)

        def frames():
            for out, err in chunks:
                yield out, err
                if out:  # the zygote's first frame (ready) came through; the stream breaks after it
                    broke.set()
                    raise docker_stream.ExecStreamBroken("the stream ended 3 bytes before the end of a frame")

        return sock, frames()

    monkeypatch.setattr(docker_stream, "exec_attached", breaking)
    calls: list[str] = []
    per_call = relay._reply

    def counted(result):
        calls.append(result.command)
        return per_call(result)

    monkeypatch.setattr(relay, "_reply", counted)
    work = tmp_path / "work"
    work.mkdir()
    (work / "mod.py").write_text(MODULE)
    test_file = tmp_path / "test_hidden.py"
    test_file.write_text(TESTS)
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, memory_mb=1024), workspace=work) as box:
        run = run_judge([test_file], box, pristine=None, timeout_s=60)
    assert broke.is_set()
    assert run.passed == ["test_calls"] and run.failures == [] and run.problems == [] and not run.agent_fault
    assert len(calls) == 3  # each call, the first included, ran in a process of its own



@pytest.mark.docker
def test_the_call_after_a_timed_out_one_is_not_lost(tmp_path, sandbox_image):
    """The request of the call after a cancelled one can reach the zygote while it still ends the cancelled
    call; it is kept and answered, not dropped (red team, 2026-12-05)."""
    from failatlas.bench_core.hidden import wire
    from failatlas.bench_core.hidden.relay import _Relay

    work = tmp_path / "work"
    work.mkdir()
    (work / "mod.py").write_text("import time\n\n\ndef slow():\n    time.sleep(60)\n\n\ndef f(x):\n    return 2 * x\n")
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, memory_mb=1024), workspace=work) as box:
        relay_ = _Relay(box, time.monotonic() + 120, 4.0, [])
        try:
            first = relay_.call(wire.encode({"op": "call", "target": "mod:slow", "args": []}))
            replies = [relay_.call(wire.encode({"op": "call", "target": "mod:f", "args": [i]})) for i in range(3)]
        finally:
            relay_.close()
    assert b"Timeout" in first
    assert [wire.decode(r) for r in replies] == [{"ok": True, "value": 2 * i} for i in range(3)]
    assert relay_._zygote is not None and relay_.timed_out_calls == 1

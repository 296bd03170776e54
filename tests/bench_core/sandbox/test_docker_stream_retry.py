"""A Docker API stream that breaks (`ValueError: 0 is not a valid stream`, docker-py's demultiplexer meeting a frame
header it cannot read) is retried inside the sandbox layer for reads, which may run again; a command whose output
stream broke is an infrastructure error, never a silently shortened output. Real engine, real image; the break is
docker-py's own error, raised by its own demultiplexer on the real frames of the first stream(s)."""

from __future__ import annotations

from pathlib import Path

import pytest
from docker.utils.socket import demux_adaptor

from failatlas.bench_core.sandbox import SandboxError, SandboxSpec
from failatlas.bench_core.sandbox.docker_sandbox import STREAM_RETRIES, DockerSandbox, transient_stream_error

pytestmark = pytest.mark.docker


class HiccupSandbox(DockerSandbox):
    """The Docker sandbox whose next `breaks` exec streams lose their alignment after their first frame."""

    breaks = 0

    def _start_exec(self, argv, **kwargs):
        exec_id, frames = super()._start_exec(argv, **kwargs)
        if self.breaks <= 0:
            return exec_id, frames
        self.breaks -= 1

        def misaligned():
            for frame in frames:
                yield frame
                yield demux_adaptor(0, b"")  # a frame of stream 0: what a misread header gives

        return exec_id, misaligned()


@pytest.fixture(scope="module")
def box(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory):
    repo = tmp_path_factory.mktemp("hiccup") / "repo"
    (repo / "out").mkdir(parents=True)
    (repo / "out" / "results.json").write_text('{"acc": 0.75}\n')
    sandbox = HiccupSandbox.start(SandboxSpec(image=sandbox_image, memory_mb=512, pids_limit=64,
                                              run_id="test-stream-retry"), workspace=repo)
    yield sandbox
    sandbox.close()


def test_the_error_is_recognised_as_the_stream_not_the_command():
    with pytest.raises(ValueError) as caught:
        demux_adaptor(0, b"x")
    assert transient_stream_error(caught.value)
    assert not transient_stream_error(ValueError("could not convert string to float: 'abc'"))


def test_a_read_whose_stream_broke_is_read_again(box: HiccupSandbox, tmp_path: Path):
    box.breaks = STREAM_RETRIES
    assert box.read_file("out/results.json") == b'{"acc": 0.75}\n'
    assert box.breaks == 0
    box.breaks = 1
    box.copy_out("out", tmp_path / "copy")
    assert (tmp_path / "copy" / "results.json").read_text() == '{"acc": 0.75}\n'


def test_a_stream_that_keeps_breaking_is_one_sandbox_error(box: HiccupSandbox):
    box.breaks = STREAM_RETRIES + 1
    with pytest.raises(SandboxError, match=rf"broke {STREAM_RETRIES + 1} times: ValueError: 0 is not a valid"):
        box.read_file("out/results.json")
    box.breaks = 0
    assert box.read_file("out/results.json") == b'{"acc": 0.75}\n'  # the sandbox is still usable


def test_a_command_whose_output_stream_broke_is_not_a_short_output(box: HiccupSandbox):
    box.breaks = 1
    with pytest.raises(SandboxError, match="output was lost"):
        box.exec("echo first; sleep 0.2; echo second", timeout=30)
    box.breaks = 0
    assert box.exec("echo first; echo second", timeout=30).stdout == "first\nsecond\n"

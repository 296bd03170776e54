"""Nothing the agent wrote is lost (issue 38, reproduction 6), with a real Docker daemon and real sandboxes.

The cause: docker-py reads an exec's output from the raw socket under the HTTP reply, so whatever the client's
buffered reader took in with the reply's headers is lost. A client slower than the daemon (a loaded host) gets
the headers and the whole output of a short command in one read: `head -c` of the conclusion then reads as ''
with exit 0, and the run was scored C = 0. `SlowClient` makes that condition every time: a real unix-socket relay
to the real daemon that hands each exec's output to the client only once the command has ended, in one write.
With `keep` it goes further and loses every exec's output after the headers or inside a frame, to show that a loss
the harness cannot repair is infrastructure, never the agent's empty conclusion.
"""

from __future__ import annotations

import hashlib
import socket
import threading
from pathlib import Path

import pytest

from failatlas.bench_core.agents.base import CONCLUSION_FILE, AgentContext, Budget, StepEvent
from failatlas.bench_core.runs.collect import collect_outputs
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.model import StepRow
from failatlas.bench_core.runs.readback import OutputsUnreadable, recorded_writes
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.sandbox import SandboxError, SandboxSpec, create_sandbox
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.errors import InfrastructureError

DOCKER_SOCK = "/var/run/docker.sock"
CONCLUSION = ("Ridge with alpha 1.0 gives a mean CV R^2 of 0.91, and the path shrinks every weight. " * 4)[:315] + "\n"


class SlowClient:
    """A unix-socket relay to the Docker daemon. Replies pass through at once, and so does the first exec stream
    (the sandbox's probe at its start), but every later exec's stream (a reply upgraded with `101`) reaches the
    client only when the daemon closes it, in one write with its headers: a client that read the headers only
    after the command had ended. With `keep` set, only that many bytes of such a stream after its headers reach
    the client: a stream that ends early, between frames (0) or inside one; `cuts`, when set, is how many streams
    are cut so before they pass whole again."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.keep: int | None = None
        self.cuts: int | None = None
        self.upgraded = 0
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(self.path)
        self._server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _cut_this_one(self) -> bool:
        with self._lock:
            if self.cuts is None:
                return True
            self.cuts -= 1
            return self.cuts >= 0

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            daemon = socket.socket(socket.AF_UNIX)
            daemon.connect(DOCKER_SOCK)
            threading.Thread(target=self._to_daemon, args=(client, daemon), daemon=True).start()
            threading.Thread(target=self._to_client, args=(daemon, client), daemon=True).start()

    @staticmethod
    def _to_daemon(client: socket.socket, daemon: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                daemon.sendall(data)
        except OSError:
            pass
        finally:
            with _quiet():
                daemon.shutdown(socket.SHUT_WR)

    def _to_client(self, daemon: socket.socket, client: socket.socket) -> None:
        held, live = b"", False
        try:
            while data := daemon.recv(65536):
                held += data
                if held.startswith(b"HTTP/1.1 101") and not live:
                    with self._lock:
                        self.upgraded += 1
                        live = self.upgraded == 1
                if live or not held.startswith(b"HTTP/1.1 101"):  # an ordinary reply, the probe: pass it on now
                    client.sendall(held)
                    held = b""
            if held:
                if self.keep is not None and self._cut_this_one():
                    held = held[:held.index(b"\r\n\r\n") + 4 + self.keep]
                client.sendall(held)  # the upgraded stream, whole, in one write
        except OSError:
            pass
        finally:
            with _quiet():
                client.shutdown(socket.SHUT_WR)


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, *_exc) -> bool:
        return kind is not None and issubclass(kind, OSError)


@pytest.fixture
def slow_client(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str):
    relay = SlowClient(tmp_path_factory.mktemp("relay") / "docker.sock")
    yield relay
    relay.close()


def _mini_ridge():
    [task] = [t for t in load_suite("failatlas-mini") if t.id == "mini-ridge-cv"]
    return task


def _docker_box(relay: SlowClient, image: str, workspace: Path | None = None):
    import docker

    from failatlas.bench_core.sandbox.docker_sandbox import DockerSandbox

    client = docker.DockerClient(base_url=relay.url)
    return DockerSandbox.start(SandboxSpec(image=image), workspace=workspace, client=client)


def _writer(box) -> tuple[AgentContext, list[StepRow]]:
    steps: list[StepRow] = []

    def record(step: StepEvent) -> None:
        steps.append(StepRow(seq=len(steps), **step.model_dump()))

    return AgentContext(view=None, sandbox=box, workdir=box.workdir, budget=Budget(), record=record), steps


@pytest.mark.docker
def test_a_short_commands_output_that_came_with_the_headers_is_read(slow_client, sandbox_image, tmp_path):
    box = _docker_box(slow_client, sandbox_image)
    try:
        box.write_file(f"{box.workdir}/{CONCLUSION_FILE}", CONCLUSION.encode())
        assert box.read_file(f"{box.workdir}/{CONCLUSION_FILE}") == CONCLUSION.encode()
        result = box.exec("echo out; echo err >&2; exit 3", timeout=30)
        assert (result.stdout, result.stderr, result.returncode) == ("out\n", "err\n", 3)
        box.copy_out(f"{box.workdir}/.failatlas", tmp_path / "copy")
        assert (tmp_path / "copy" / "conclusion.md").read_text() == CONCLUSION
    finally:
        box.close()
    assert slow_client.upgraded >= 4, "the exec streams went through the relay"


@pytest.mark.docker
@pytest.mark.slow
def test_gold_behind_a_slow_client_keeps_its_conclusion(store, tmp_path, slow_client, sandbox_image, monkeypatch):
    """Reproduction 6 end to end: gold on mini-ridge-cv in Docker, every exec's output arriving with its headers."""
    task = _mini_ridge()
    save_tasks(store, [task], source="failatlas-mini")
    monkeypatch.setenv("DOCKER_HOST", slow_client.url)
    report = run_batch(store, plan(store, [task], "gold").todo,
                       RunConfig(runs_dir=tmp_path / "runs", sandbox="docker", image=sandbox_image))
    [run] = store.query_dicts("SELECT id, status, infra_error, outputs FROM runs")
    assert report.by_status == {"completed": 1}, run["infra_error"]
    import json

    outputs = json.loads(run["outputs"])
    assert outputs["conclusion"] == task.expected_conclusion
    assert outputs["design"] and outputs["run_script"] and outputs["readback"] == []
    [(args,)] = store.query("SELECT arguments FROM run_steps WHERE tool = 'write_file' AND arguments LIKE ?",
                            [f'%"path": "{CONCLUSION_FILE}"%'])
    written = json.loads(args)
    data = task.expected_conclusion.encode()
    assert (written["size_bytes"], written["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert slow_client.upgraded > 5


@pytest.mark.docker
def test_outputs_lost_on_the_way_out_are_infrastructure_never_the_agents(slow_client, sandbox_image, tmp_path):
    """Every exec's output is dropped after its headers: the read says '' with exit 0, the copy's archive is
    empty. What the agent wrote through `write` says 316 bytes: that is never collected as an empty conclusion."""
    masked = tmp_path / "masked"
    masked.mkdir()
    (masked / "README.md").write_text("task\n")
    box = _docker_box(slow_client, sandbox_image, workspace=masked)
    try:
        ctx, steps = _writer(box)
        ctx.write(CONCLUSION_FILE, CONCLUSION)
        slow_client.keep = 0
        with pytest.raises(OutputsUnreadable) as caught:
            collect_outputs(box, box.workdir, masked, tmp_path / "scratch", written=recorded_writes(steps))
    finally:
        slow_client.keep = None
        box.close()
    assert isinstance(caught.value, InfrastructureError)
    message = caught.value.one_line()
    assert CONCLUSION_FILE in message and f"written {len(CONCLUSION)} bytes" in message, message


@pytest.mark.docker
@pytest.mark.slow
def test_a_gold_run_whose_outputs_cannot_be_read_is_infrastructure(store, tmp_path, slow_client, sandbox_image,
                                                                   monkeypatch):
    """The same loss through the runner: the run is stored as `infra_error` naming the file, so it is redone and
    stays out of the agent's scores, never a completed run with an empty conclusion."""
    task = _mini_ridge()
    save_tasks(store, [task], source="failatlas-mini")
    monkeypatch.setenv("DOCKER_HOST", slow_client.url)
    slow_client.keep = 0  # from the second exec on (the probe passes whole)
    run_batch(store, plan(store, [task], "gold").todo,
              RunConfig(runs_dir=tmp_path / "runs", sandbox="docker", image=sandbox_image))
    [(status, reason, outputs)] = store.query("SELECT status, infra_error, outputs FROM runs")
    assert status == "infra_error", outputs
    assert "could not be read back consistently" in reason and ".failatlas/design.json" in reason, reason
    assert plan(store, [task], "gold", retry_infra=True).todo, "an infra_error run is planned again"


@pytest.mark.docker
def test_reads_that_lost_their_stream_once_are_read_again(slow_client, sandbox_image, tmp_path):
    """The three output reads and the first copy of the working copy lose everything after their headers; the copy
    is made again and the conclusion, disagreeing with the copy and with what the agent wrote, is read again:
    everything the agent wrote is collected, and nothing is blamed on it."""
    masked = tmp_path / "masked"
    masked.mkdir()
    (masked / "README.md").write_text("task\n")
    box = _docker_box(slow_client, sandbox_image, workspace=masked)
    try:
        ctx, steps = _writer(box)
        ctx.write(CONCLUSION_FILE, CONCLUSION)
        slow_client.keep, slow_client.cuts = 0, 4
        outputs = collect_outputs(box, box.workdir, masked, tmp_path / "scratch", written=recorded_writes(steps))
    finally:
        slow_client.keep = slow_client.cuts = None
        box.close()
    assert outputs.conclusion == CONCLUSION and outputs.design is None and outputs.run_script is None
    assert (outputs.errors, outputs.readback, outputs.diff) == ([], [], "")


def test_a_file_the_agents_own_commands_changed_after_writing_it_is_what_is_collected(tmp_path):
    """The other side of the check: a mismatch the agent made (it wrote, then its command rewrote the file) is
    what the sandbox holds, collected and noted, never an infrastructure error; a file it never wrote stays ''."""
    masked = tmp_path / "masked"
    masked.mkdir()
    (masked / "README.md").write_text("task\n")
    box = create_sandbox("local", SandboxSpec(), workspace=masked)
    try:
        ctx, steps = _writer(box)
        ctx.write(CONCLUSION_FILE, CONCLUSION)
        ctx.write(".failatlas/run.sh", "echo hi\n")
        ctx.sh(f"printf 'changed' > {CONCLUSION_FILE}; : > .failatlas/run.sh")
        outputs = collect_outputs(box, box.workdir, masked, tmp_path / "scratch", written=recorded_writes(steps))
    finally:
        box.close()
    assert outputs.conclusion == "changed" and outputs.run_script == "" and outputs.design is None
    assert len(outputs.readback) == 2 and all("its own commands changed it" in n for n in outputs.readback)
    assert CONCLUSION_FILE in outputs.readback[0] and "7 bytes" in outputs.readback[0]
    assert outputs.errors == []


@pytest.mark.docker
def test_a_stream_that_ends_inside_a_frame_is_an_error_never_a_shorter_output(slow_client, sandbox_image):
    box = _docker_box(slow_client, sandbox_image)
    try:
        box.write_file(f"{box.workdir}/{CONCLUSION_FILE}", CONCLUSION.encode())
        slow_client.keep = 8 + 100  # one frame header and 100 of its 316 bytes
        with pytest.raises(SandboxError, match="broke 3 times: ExecStreamBroken: the stream ended 216 bytes before"):
            box.read_file(f"{box.workdir}/{CONCLUSION_FILE}")
        with pytest.raises(SandboxError, match="output was lost"):
            box.exec(f"cat {CONCLUSION_FILE}", timeout=30)
        slow_client.keep = None
        assert box.read_file(f"{box.workdir}/{CONCLUSION_FILE}") == CONCLUSION.encode()
    finally:
        slow_client.keep = None
        box.close()


@pytest.mark.docker
def test_the_egress_proxys_log_behind_a_slow_client_keeps_its_refusals(slow_client, sandbox_image, monkeypatch):
    """The proxy's log is read by short commands in its own container: read there as in the sandbox, so the
    network steps of a run (its refusals) are not lost the way the conclusion was."""
    from failatlas.bench_core.sandbox.policy import registry_hosts

    monkeypatch.setenv("DOCKER_HOST", slow_client.url)
    spec = SandboxSpec(image=sandbox_image, network="registries", allow_hosts=registry_hosts())
    with create_sandbox("docker", spec, workspace=None) as box:
        box.exec("curl -sS -m 10 http://refused.example.org/ 2>&1", timeout=30)
        log = box.egress_log()
    assert any(e.get("host") == "refused.example.org" and not e.get("allowed") for e in log), log

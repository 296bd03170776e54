"""Links into /data/NAME that an agent leaves in its working copy come out of the sandbox onto the host (issue 40:
`tasks.data.is_data_link`). On a GPU host /data often exists and holds huge or private files, or a FIFO; no host
reader in collection, the diff, scoring (re-run, constructed, counterfactual and transplant trees, literals,
rebinding, derived and hidden tests) or ingest may follow such a link.

The test plants a real folder under /data on this host (a FIFO, an 8 GiB sparse file, a Python file with a
marker), runs a hostile agent under bwrap that points the task's masked file, its results file, its outputs and
new files and folders there, scores the run offline, and watches the folder with inotify: nothing on the host may
open anything in it (a FIFO opened for reading would block the scorer for good; the watcher opens its write end,
so a reader that does open it gets end-of-file instead of hanging the test)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import struct
import tempfile
import threading
import time
from pathlib import Path

import pytest

from failatlas.bench_core.agents.base import AgentOutcome, Budget, register_agent
from failatlas.bench_core.agents.builtin import GoldAgent
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.sandbox.bwrap_setup import bwrap_binary, bwrap_problem
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def bwrap_works() -> None:
    """These tests fail, never skip, where bubblewrap cannot run: scripts/setup.sh installs it."""
    problem = bwrap_problem(bwrap_binary())
    if problem is not None:
        pytest.fail(f"bwrap sandboxes cannot run here ({problem}): run scripts/setup.sh")

_IN_OPEN, _IN_ACCESS = 0x20, 0x01


class _Watch:
    """Every open (and read) of an entry of the watched folders, by inotify; the FIFOs' write ends opened as
    soon as a reader waits on them."""

    def __init__(self, folders: list[Path], fifos: list[Path]) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK)
        assert self.fd >= 0
        self.names = {}
        for folder in folders:
            wd = libc.inotify_add_watch(self.fd, str(folder).encode(), _IN_OPEN | _IN_ACCESS)
            assert wd >= 0
            self.names[wd] = folder
        self.fifos, self.seen, self.fifo_readers = fifos, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            for fifo in self.fifos:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # succeeds only while a reader has it open
                except OSError:
                    continue
                self.fifo_readers += 1
                os.close(fd)
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                data = b""
            while data:
                wd, mask, _cookie, size = struct.unpack_from("iIII", data)
                name = data[16:16 + size].rstrip(b"\0").decode()
                self.seen.append(f"{self.names[wd]}/{name} mask={mask:#x}")
                data = data[16 + size:]
            time.sleep(0.02)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        os.close(self.fd)


@pytest.fixture
def host_data():
    """/data/failatlas_test_<pid> on this host: a FIFO, a sparse 8 GiB file, a folder with a FIFO, a .py file."""
    root = Path("/data")
    made_root = not root.exists()
    try:
        root.mkdir(exist_ok=True)
        folder = root / f"failatlas_test_{os.getpid()}"
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a folder under /data here: {exc}")
    try:
        os.mkfifo(folder / "fifo")
        with open(folder / "huge", "wb") as handle:
            handle.truncate(8 << 30)
        (folder / "secret.py").write_text("HOST_SECRET = 424242.5\n\n\ndef fit(self, X, y):\n    return self\n")
        (folder / "dir").mkdir()
        os.mkfifo(folder / "dir" / "x.py")
        (folder / "dir" / "y.py").write_text("HOST_SECRET_TOO = 777.25\n")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if made_root:
            with contextlib.suppress(OSError):
                root.rmdir()


class _DataLinkAgent:
    """Leaves links into /data/NAME wherever the harness reads: the masked file, the results file, its outputs,
    new code files and a folder of code."""

    name = "test-data-links"
    needs_reference = False
    hidden = True
    target = "/data/failatlas_test"

    def __init__(self, **params) -> None:
        self.target = params.get("target", self.target)

    def run(self, ctx) -> AgentOutcome:
        t = self.target
        ctx.sh("mkdir -p .failatlas && "
               f"rm -f ridge.py && ln -s {t}/secret.py ridge.py && "
               f"ln -s {t}/fifo results.json && ln -s {t}/fifo helper.py && ln -s {t}/huge big.csv && "
               f"ln -s {t}/dir pkg && ln -s {t}/fifo .failatlas/design.json && "
               f"ln -s {t}/huge .failatlas/conclusion.md && ln -s {t}/fifo .failatlas/run.sh && "
               "mkdir -p sub && ln -s ../pkg sub/up")
        return AgentOutcome(notes="data links")


class _GoldDataLinkAgent(GoldAgent):
    """The gold agent's passing run, plus links into /data/NAME as new code, data and folders: a pass is what
    brings in the counterfactual, transplant and derived-test trees."""

    name = "test-gold-data-links"
    hidden = True

    def __init__(self, **params) -> None:
        super().__init__()
        self.target = params["target"]

    def run(self, ctx) -> AgentOutcome:
        outcome = super().run(ctx)
        t = self.target
        ctx.sh(f"ln -s {t}/fifo helper.py && ln -s {t}/secret.py extra.py && ln -s {t}/huge big.csv && "
               f"ln -s {t}/dir pkg && mkdir -p sub && ln -s ../pkg sub/up && ln -s {t}/fifo sub/notes.md")
        return outcome


@pytest.fixture(autouse=True)
def _test_agents():
    """The two agents are registered only while this module's tests run: registered at import, they were in every
    other test's registry (`failatlas agents --all` is checked whole in tests/test_cli_widths.py)."""
    from failatlas.bench_core.agents.base import AGENTS

    for agent in (_DataLinkAgent, _GoldDataLinkAgent):
        register_agent(agent.name)(agent)
    yield
    for agent in (_DataLinkAgent, _GoldDataLinkAgent):
        AGENTS.unregister(agent.name)


@pytest.mark.parametrize("agent", [_DataLinkAgent.name, _GoldDataLinkAgent.name])
def test_no_host_reader_follows_an_agents_data_links(host_data: Path, agent: str) -> None:
    task = next(t for t in load_suite("failatlas-mini") if t.id == "mini-ridge-cv")
    root = Path(tempfile.mkdtemp(prefix="failatlas-datalinks-", dir="/tmp"))
    root.chmod(0o755)
    watch = _Watch([host_data, host_data / "dir"], [host_data / "fifo", host_data / "dir" / "x.py"])
    try:
        store = open_store(root / "s.duckdb")
        save_tasks(store, [task], source="failatlas-mini")
        work = plan(store, [task], agent, agent_params={"target": str(host_data)}).todo
        config = RunConfig(runs_dir=root / "runs", sandbox="bwrap", budget=Budget(command_timeout_s=30,
                                                                                  max_seconds=120))
        batch = run_batch(store, work, config, workers=1)
        assert not batch.infra_errors, batch.infra_errors
        [(outputs,)] = store.query("SELECT outputs FROM runs")
        assert str(host_data / "fifo") in outputs  # the links did come out onto the host and into the diff
        done: dict = {}
        scorer = threading.Thread(target=lambda: done.setdefault("result", score(
            store, ScoreParams(runs_dir=root / "runs", sandbox="bwrap", llm=False))), daemon=True)
        scorer.start()
        scorer.join(600)
        assert not scorer.is_alive(), "scoring hung"
        assert done["result"].scored == 1, done["result"]
        if agent == _GoldDataLinkAgent.name:  # it passed: the trees built after a pass were built and scored
            [(passed,)] = store.query("SELECT count(*) FROM validations WHERE outcome = 'passed'")
            assert passed == 1
    finally:
        watch.close()
        shutil.rmtree(root, ignore_errors=True)
    assert watch.fifo_readers == 0, "a host reader opened a FIFO under /data"
    assert watch.seen == [], watch.seen


def test_the_watch_sees_a_host_reader_that_follows_a_link(host_data: Path, tmp_path: Path) -> None:
    """The control: a reader that follows a data link is seen, and one stuck on the FIFO is let go."""
    os.symlink(host_data / "secret.py", tmp_path / "a.py")
    os.symlink(host_data / "fifo", tmp_path / "b.json")
    watch = _Watch([host_data, host_data / "dir"], [host_data / "fifo"])
    try:
        (tmp_path / "a.py").read_text()
        (tmp_path / "b.json").read_bytes()  # blocks until the watcher opens the write end
        time.sleep(0.2)
    finally:
        watch.close()
    assert watch.fifo_readers >= 1
    assert any(line.endswith(("secret.py mask=0x20", "secret.py mask=0x1")) for line in watch.seen), watch.seen


def test_preparing_and_scanning_a_repository_never_reads_through_its_data_links(host_data: Path,
                                                                               tmp_path: Path) -> None:
    """A hostile repository (the cache keeps its links into /data/NAME) whose masked file is such a link to a FIFO,
    whose masked folder is one to a folder of code, and whose reference file sits below one: preparing it must
    not block on the FIFO or read the host's files (the leak scan read masked files through the link)."""
    from failatlas.bench_core.prepare import prepare_workspace
    from failatlas.bench_core.scoring.evidence.literals import reference_values
    from failatlas.bench_core.tasks.model import Masking, RepoRef, RunSpec, TaskSpec

    repo = tmp_path / "task" / "repo"
    repo.mkdir(parents=True)
    (repo / "main.py").write_text("def f():\n    return 1\n")
    os.symlink(host_data / "fifo", repo / "m.py")
    os.symlink(host_data / "dir", repo / "lib")
    os.symlink(host_data / "dir", repo / "src")
    (tmp_path / "task" / "task.json").write_text("{}")
    task = TaskSpec(id="toy-data-links", benchmark="toy", kind="masked_functions", question="q?",
                    repository=RepoRef(local_path="repo"), source=str(tmp_path / "task" / "task.json"),
                    masking=Masking(files=["m.py", "lib"], functions=[{"path": "main.py", "qualname": "f"}]),
                    implementation={"reference_files": ["src/y.py"]},
                    run=RunSpec(command="python3 main.py"))
    watch = _Watch([host_data, host_data / "dir"], [host_data / "fifo", host_data / "dir" / "x.py"])
    try:
        ws = prepare_workspace(task, tmp_path / "ws")
        values = reference_values(task, repo)
    finally:
        watch.close()
    assert set(ws.masked_files) == {"m.py", "lib"}
    assert 777.25 not in values  # HOST_SECRET_TOO in /data/.../dir/y.py was not read
    assert watch.fifo_readers == 0, "preparing the repository opened a FIFO under /data"
    assert watch.seen == [], watch.seen

"""The harness side of the hidden-test boundary: stage the judge, start it on the host, relay its calls to the
sandbox through the Sandbox protocol only (`write_file`, `exec`), and read its result.

The judge (`judge_main.py`, a `python3 -I` process of the harness's Python, forked by a server that has pytest
imported where one runs: `judge_start.py`) runs pytest over the hidden tests with the pristine masked repository
on its path and never imports the agent's code. Each `agent.call` /
`agent.run` of a test arrives here as a frame; the request is written into the sandbox's working copy and a fresh
worker process (`worker.py`) runs it there, in whatever sandbox kind the run uses. The worker's reply line goes back
to the judge unread, as the bytes it is (the worker writes ASCII JSON; anything else is not its reply), at most
`wire.MAX_BYTES` of it, far below the judge's frame limit: the judge decodes it strictly, as the agent's data. A
reply that never comes (a crash, the deadline, output past the cap, a line that is not ASCII) is answered here as
the agent's failure, typed like any other.

No step can hang: every read from and write to the judge waits at most until the task's deadline plus
JUDGE_GRACE_S, each call at most until the deadline, and the judge runs under an address-space limit
(JUDGE_MEMORY_BYTES). What ends the exchange early is told apart by when it happens: the judge never imports the
agent's code, so before the first reply reaches it nothing the agent did can touch it, and a judge that fails then
(a test file that does not import, a crash) is the harness's or the task's fault, `JudgeError` (`judge_failed`).
From the first reply on, the agent's bytes are in the exchange, and a judge that dies, stops reading (a broken
pipe, a write that does not drain) or ends without a result is the agent's I failure, recorded as a problem of the
run (score 0, the reason named), never `judge_failed`: gold's runs, whose replies are well formed, show that the
judge itself does not fail on those. The same holds for the sandbox: once a worker (or the zygote) has started in
it, the agent's code may have run there, and a sandbox operation that then fails (a write or read refused, a
worker that cannot start because the agent's processes hold the process limit, a refused exec) raises
`AgentFaultError`, never the InfrastructureError it was; before that, it stays the InfrastructureError
(`judge_failed`). `run_judge_retried` tries a run that ended by either kind of agent fault (AgentFaultError,
`JudgeRun.agent_fault`) once more in a fresh sandbox; if it recurs, it is the agent's I failure.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import selectors
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.hidden.judge_start import JudgeStartError, start_judge
from failatlas.bench_core.hidden.zygote import (
    ENV,
    REPLY_LIMIT,
    WORKER_NAME,
    error_reply,
    start_zygote,
    too_large,
    worker_dir,
)
from failatlas.bench_core.sandbox.protocol import write_folder
from failatlas.core import syntax
from failatlas.core.errors import AgentFaultError, FailAtlasError, HarnessSetupError, InfrastructureError

HERE = Path(__file__).resolve().parent
SCRIPTS = {"failatlas_wire.py": "wire.py", "failatlas_hidden.py": "fixture.py", "failatlas_judge.py": "judge_main.py",
           "failatlas_compare.py": "compare.py"}
REPLY_MARKER = "FAILATLAS_REPLY "
HEADER = struct.Struct(">cQ")
MAX_FRAME = 128 * 1024 * 1024  # a frame from the judge (its requests and its result)
JUDGE_MEMORY_BYTES = 8 * 1024 * 1024 * 1024  # RLIMIT_AS of the judge process
# the judge's own work between calls (data generation, reference computations) may take this long beyond the
# task's deadline before it is stopped
JUDGE_GRACE_S = 120.0
JUDGE_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "TMPDIR")


class JudgeError(InfrastructureError):
    """The hidden-test judge itself failed (it crashed, or a hidden test file does not import): the task's or
    the harness's problem, never the agent's; recorded as `judge_failed`."""


@dataclass
class JudgeRun:
    """What the judge reported: the names of the tests that passed, one record per failed test (`test`,
    `exception`, `object`, `message`), problems of the run as a whole (the deadline), and the calls relayed."""

    passed: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    calls: int = 0
    # the exchange ended early after the agent's code had run (module docstring), for a reason a fresh sandbox
    # might not meet again (not the agent's own calls running out of time): worth one more try
    agent_fault: bool = False

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failures)

    @property
    def ok(self) -> bool:
        return self.total > 0 and not self.failures and not self.problems


def stage(paths: list[Path], folder: Path) -> Path:
    """Copy the judge's scripts and the hidden test files (one folder each, so equal names do not clash) into
    `folder`; returns the folder of the tests."""
    folder.mkdir(parents=True)
    for target, source in SCRIPTS.items():
        shutil.copyfile(HERE / source, folder / target)
    (folder / "pytest.ini").write_text("[pytest]\n")
    tests = folder / "tests"
    for index, path in enumerate(paths):
        (tests / str(index)).mkdir(parents=True)
        shutil.copyfile(path, tests / str(index) / path.name)
    return tests


def install_worker(sandbox, folder: str) -> None:
    """Write the worker and its codec into `folder` of the sandbox's working copy."""
    write_folder(sandbox, folder, [(WORKER_NAME, (HERE / "worker.py").read_bytes()),
                                   ("failatlas_wire.py", (HERE / "wire.py").read_bytes())])


def _reply(result) -> bytes:
    """The worker's reply line as it is (ASCII, at most REPLY_LIMIT bytes), or an error reply saying why there is
    none."""
    if result.timed_out or result.killed_reason == "timeout":
        return error_reply("Timeout", f"the call did not finish within {result.duration_s or 0:.0f} s")
    if result.killed_reason == "oom":
        return error_reply("OutOfMemory", "the agent's process ran out of memory")
    if result.truncated:  # the reply line may be cut or spliced from the output's head and tail
        return too_large()
    lines = [ln for ln in (result.stdout or "").splitlines() if ln.startswith(REPLY_MARKER)]
    if lines:
        line = lines[-1][len(REPLY_MARKER):]
        if len(line) > REPLY_LIMIT:
            return too_large()
        if not line.isascii():
            return error_reply("MalformedReply", "the agent's process wrote a reply line that is not the "
                                "worker's (not ASCII JSON)")
        return line.encode("ascii")
    tail = [ln for ln in (result.stderr or "").splitlines() if ln.strip()]
    more = f": {tail[-1][:300]}" if tail else ""
    return error_reply("NoReply", f"the agent's process ended with exit code {result.returncode} before "
                        f"replying{more}")


class _Relay:
    """Runs the judge's calls in the sandbox: through a zygote (`zygote.py`: forking a fresh process per call from
    a process that holds the heavy imports) when it comes up, else one `python3 worker.py` per call. Both are the
    sandbox protocol only."""

    def __init__(self, sandbox, deadline: float, call_timeout: float, preload: list[str]) -> None:
        self.sandbox, self.deadline, self.call_timeout, self.preload = sandbox, deadline, call_timeout, preload
        self.workdir = getattr(sandbox, "workdir", None) or "/workspace"
        self.folder = worker_dir()
        self.calls = 0
        self.dispatched = False  # a call was handed to a worker: the agent's code may run from here on
        self.timed_out_calls = 0
        self._zygote = None

    def agent_started(self) -> bool:
        """Whether the agent's code may have run in the sandbox: a call was handed to a worker, or a command (the
        zygote) started there (`commands_started`, which the built-in sandboxes count)."""
        return self.dispatched or getattr(self.sandbox, "commands_started", 0) > 0

    def call(self, payload: bytes) -> bytes:
        """The reply to one call; raises AgentFaultError when the sandbox fails after the agent's code may have run
        in it, InfrastructureError when it fails before."""
        try:
            reply = self._call(payload)
        except InfrastructureError as exc:
            if not self.agent_started() or isinstance(exc, HarnessSetupError):
                raise
            raise AgentFaultError(f"the sandbox failed after the agent's code had run in it: {exc}") from exc
        return reply

    def _call(self, payload: bytes) -> bytes:
        self.calls += 1
        if self.calls == 1:  # once: an agent's code that breaks it later fails its own later calls
            if self._left() <= 1:
                return self._spent()
            install_worker(self.sandbox, self.folder)
            self._zygote = start_zygote(self.sandbox, self.workdir, self.folder, self.preload, self.deadline)
        left = self._left()  # after the zygote's start, which took its share
        if left <= 1:
            return self._spent()
        self.dispatched = True
        if self._zygote is not None and self._zygote.alive:
            answered = self._zygote.call(self.calls, payload, left)
            if answered is not None:  # else the harness's stream broke: the call runs in a process of its own
                self.timed_out_calls += answered[1]
                return answered[0]
            left = self._left()
        request = f"{self.folder}/request-{self.calls}.json"
        try:
            self.sandbox.write_file(request, payload)
        except InfrastructureError:
            raise
        except (FailAtlasError, OSError, ValueError) as exc:  # an earlier call of the agent's code broke the folder
            return error_reply("WorkerUnavailable", f"the call could not be placed in the sandbox: {exc}")
        result = self.sandbox.exec(f"exec python3 -I -B {self.folder}/{WORKER_NAME} {request}", timeout=left,
                                   cwd=self.workdir, env=ENV, output_limit=REPLY_LIMIT + 4096)
        self.timed_out_calls += bool(result.timed_out or result.killed_reason == "timeout")
        return _reply(result)

    def _left(self) -> float:
        return min(self.deadline - time.monotonic(), self.call_timeout)

    def _spent(self) -> bytes:
        self.timed_out_calls += 1
        return error_reply("Timeout", "the hidden tests' time was spent before this call")

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()


def preload_modules(pristine: Path | None) -> list[str]:
    """Top-level modules the task's pristine repository imports that it does not provide itself (numpy,
    scikit-learn, torch, ...): what the zygote imports once so that calls do not pay for them each time."""
    if pristine is None:
        return []
    own = {p.stem for p in pristine.glob("*.py")} | {p.name for p in pristine.iterdir() if p.is_dir()}
    names: dict[str, None] = {}
    for path in sorted(pristine.rglob("*.py"))[:500]:
        try:
            tree = syntax.read(path)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update((alias.name, None) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names[node.module] = None
    keep = [n for n in names if n.split(".")[0] not in own and n.split(".")[0] not in sys.stdlib_module_names]
    return keep[:50]


def _read_frame(fd: int, selector: selectors.BaseSelector, until: float) -> tuple[bytes, bytes] | None:
    """One frame from the judge, or None when it closed the channel; raises TimeoutError past `until`."""
    buffer = b""
    need = HEADER.size
    header = None
    while True:
        while len(buffer) < need:
            if not selector.select(timeout=max(0.0, until - time.monotonic())):
                raise TimeoutError
            chunk = os.read(fd, min(need - len(buffer), 1 << 20))
            if not chunk:
                return None
            buffer += chunk
        if header is None:
            header = HEADER.unpack(buffer[:HEADER.size])
            if header[1] > MAX_FRAME:
                raise JudgeError(f"the hidden-test judge sent a frame of {header[1]} bytes")
            buffer, need = b"", header[1]
            if need == 0:
                return header[0], b""
            continue
        return header[0], buffer


def _send(fd: int, payload: bytes, selector: selectors.BaseSelector, until: float) -> None:
    """One reply frame to the judge (`fd` is non-blocking); raises TimeoutError when the judge does not read it by
    `until`, BrokenPipeError when it is gone."""
    data = memoryview(HEADER.pack(b"R", len(payload)) + payload)
    while data:
        if not selector.select(timeout=max(0.0, until - time.monotonic())):
            raise TimeoutError
        try:
            data = data[os.write(fd, data[:1 << 20]):]
        except BlockingIOError:
            continue


def _agent_ended(run: JudgeRun, why: str) -> JudgeRun:
    """The exchange ended after the agent's replies entered it (module docstring): the agent's I failure."""
    run.agent_fault = True
    run.problems.append(f"the hidden-test judge stopped while handling the agent's replies ({why}), so the "
                        "remaining hidden tests count as failed")
    return run


def _judge_env() -> dict[str, str]:
    """The judge's environment: the few variables it keeps, pytest's own switches and one thread for numerical
    libraries. No PYTHON* variable: `-I` makes the interpreter ignore them all (PYTHONHASHSEED among them), so
    the judge's str hashes are randomised as any interpreter's are."""
    env = {k: os.environ[k] for k in JUDGE_ENV_KEEP if k in os.environ}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTEST_ADDOPTS="",
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    return env


def _result(raw: bytes, calls: int) -> JudgeRun:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise JudgeError(f"the hidden-test judge's result is unreadable: {exc}") from None
    if data.get("collection_errors"):
        raise JudgeError("a hidden test file cannot be collected: " + "; ".join(data["collection_errors"][:3]))
    failed = {f["test"] for f in data["failures"]}
    return JudgeRun(passed=[p for p in dict.fromkeys(data["passed"]) if p not in failed],
                    failures=data["failures"], calls=calls)


def run_judge(paths: list[Path], sandbox, *, pristine: Path | None, timeout_s: float,
              python: str = sys.executable, fork: bool = True) -> JudgeRun:
    """Run the hidden tests `paths` in a judge process on the host, their calls relayed to `sandbox` (started
    from the tree to judge); `pristine` is the masked repository without the agent's diff (the tests' trusted
    helpers). Raises JudgeError when the judge itself fails, InfrastructureError (SandboxError) when the sandbox
    does before the agent's code may have run in it, AgentFaultError when it does after. `fork`: start the judge
    from the fork server (`judge_start.py`) where one runs, else as a fresh process."""
    with tempfile.TemporaryDirectory(prefix="failatlas-judge-") as tmp:
        tests = stage(paths, Path(tmp) / "judge")
        to_parent_r, to_parent_w = os.pipe()
        to_judge_r, to_judge_w = os.pipe()
        log = Path(tmp) / "judge.log"
        start = time.monotonic()
        deadline = start + timeout_s
        relay = _Relay(sandbox, deadline, timeout_s, preload_modules(pristine))
        try:
            with open(log, "wb") as log_handle:
                proc = start_judge(python, Path(tmp) / "judge" / "failatlas_judge.py",
                                   [str(tests), str(pristine or "")], (to_parent_w, to_judge_r),
                                   log=log_handle.fileno(), cwd=Path(tmp) / "judge", env=_judge_env(),
                                   memory=JUDGE_MEMORY_BYTES, fork=fork,
                                   path_first=[Path(tmp) / "judge", *([pristine] if pristine else [])])
        except BaseException as exc:
            for fd in (to_parent_r, to_parent_w, to_judge_r, to_judge_w):
                os.close(fd)
            if isinstance(exc, (OSError, JudgeStartError)):  # nothing of the agent ran yet: the harness's failure
                raise JudgeError(f"the hidden-test judge could not start: {exc}") from exc
            raise
        os.close(to_parent_w)
        os.close(to_judge_r)
        os.set_blocking(to_judge_w, False)
        selector, writer = selectors.DefaultSelector(), selectors.DefaultSelector()
        selector.register(to_parent_r, selectors.EVENT_READ)
        writer.register(to_judge_w, selectors.EVENT_WRITE)
        until = deadline + JUDGE_GRACE_S
        try:
            while True:
                try:
                    frame = _read_frame(to_parent_r, selector, until)
                except TimeoutError:
                    # a deadline the agent's own calls did not spend (the judge or the sandbox stalled) may not
                    # recur in a fresh sandbox; one they spent would
                    run = JudgeRun(calls=relay.calls, agent_fault=relay.agent_started() and not relay.timed_out_calls)
                    run.problems.append(f"the hidden tests did not finish within {timeout_s:.0f} s")
                    return run
                except JudgeError:
                    if relay.calls == 0:
                        raise
                    return _agent_ended(JudgeRun(calls=relay.calls), "it sent a frame past the limit")
                if frame is None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=30)
                    tail = log.read_text(errors="replace").strip().splitlines()[-5:]
                    why = f"exit code {proc.returncode}: {' | '.join(tail)[-300:]}"
                    if relay.calls:
                        return _agent_ended(JudgeRun(calls=relay.calls), f"it ended without a result, {why}")
                    raise JudgeError(f"the hidden-test judge ended ({why}) without a "
                                     "result")
                kind, payload = frame
                if kind == b"D":
                    return _result(payload, relay.calls)
                reply = relay.call(payload)
                try:
                    _send(to_judge_w, reply, writer, until)
                except TimeoutError:
                    return _agent_ended(JudgeRun(calls=relay.calls), "it did not read a reply in time")
                except OSError as exc:  # BrokenPipeError: the judge is gone
                    return _agent_ended(JudgeRun(calls=relay.calls), f"{type(exc).__name__} on its channel")
        finally:
            relay.close()
            selector.close()
            writer.close()
            for fd in (to_parent_r, to_judge_w):
                os.close(fd)
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def run_judge_retried(paths: list[Path], start, *, pristine: Path | None, timeout_s: float,
                      python: str = sys.executable) -> JudgeRun:
    """`run_judge` in a fresh sandbox from `start()` (a context manager), and once more in another when the first
    ended by a fault after the agent's code had run in it (the sandbox failed: AgentFaultError; the judge stopped or
    stalled: `JudgeRun.agent_fault`). A fault that recurs is the agent's I failure: a run with no test passed and
    the reason as its problem. Raises JudgeError and InfrastructureError as `run_judge` does before any of the
    agent's code ran (`judge_failed`)."""
    faults = []
    for _attempt in range(2):
        try:
            with start() as sandbox:
                run = run_judge(paths, sandbox, pristine=pristine, timeout_s=timeout_s, python=python)
        except AgentFaultError as exc:
            faults.append(str(exc))
            continue
        if not run.agent_fault:
            return run
        faults.append("; ".join(run.problems))
    return JudgeRun(problems=[f"the hidden tests failed twice, each time in a fresh sandbox, after the agent's code "
                              f"had run there (the agent's failure): {faults[-1][:500]}"], agent_fault=True)

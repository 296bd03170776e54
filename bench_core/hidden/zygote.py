"""The harness's side of the hidden-test zygote (`worker.py`'s `serve`): one long process in the sandbox that holds
the task's heavy imports and forks a fresh process per call, so that calls do not each pay for them.

Two ways to talk to it, both the sandbox protocol only:
- `ChannelZygote`, where the sandbox can hold a command's stdin and stdout open (`open_channel`: Docker's attached
  exec): requests and replies are frames on them (`worker.FRAME`), no sandbox operation per call. In Docker each
  file placed or read is a daemon call of about 55 ms of the host's CPU, and the file exchange below made two thirds
  of scoring's daemon calls (benchmarks/RESULTS.md).
- `FileZygote` elsewhere: the request and a `go` file are written into its folder and the reply file is polled
  (`write_file`, `read_file`; cheap where the working copy is a host folder: local, bwrap).
Either answers a call with the reply's bytes as the call's process wrote them (the judge decodes them as the agent's
data) or an error reply saying why there is none. A zygote that does not come up, or whose exchange breaks, is
`alive` no more, and the relay runs each later call in a process of its own.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid

from failatlas.bench_core.hidden import wire
from failatlas.bench_core.hidden.worker import CANCEL, FRAME, FRAME_MAGIC, READY, REPLY, REQUEST
from failatlas.bench_core.sandbox.channel import ChannelError
from failatlas.core.errors import FailAtlasError, InfrastructureError

WORKER_PREFIX = ".failatlas-hidden-"  # + a fresh suffix per exchange (`worker_dir`)
WORKER_NAME = "failatlas_worker.py"
REPLY_LIMIT = wire.MAX_BYTES  # a reply relayed to the judge, whose frame limit is twice this
# how long the zygote may take to import the task's libraries before calls fall back to one process each (never past
# the hidden tests' deadline)
ZYGOTE_START_S = 120.0
ENV = {"PYTHONDONTWRITEBYTECODE": "1"}


def error_reply(exception: str, message: str) -> bytes:
    return json.dumps({"ok": False, "error": {"exception": exception, "object": "the agent's process",
                                              "message": message}}).encode()


def too_large() -> bytes:
    return error_reply("ReplyTooLarge", f"the agent's process wrote more than {REPLY_LIMIT} bytes of reply")


def worker_dir() -> str:
    """A folder of the working copy for one exchange's worker, named afresh each time: nothing the agent's tree
    holds can be at its path (a file or link planted at a fixed name would fail the harness's own write, before
    any of the agent's code ran, and pass for the harness's failure)."""
    return WORKER_PREFIX + uuid.uuid4().hex[:16]


def _command(mode: str, folder: str, preload: list[str]) -> str:
    names = " ".join(n for n in preload if all(p.isidentifier() for p in n.split(".")))
    return f"exec python3 -I -B {folder}/{WORKER_NAME} {mode} {folder} {names}"


def start_zygote(sandbox, workdir: str, folder: str, preload: list[str],
                 deadline: float) -> FileZygote | ChannelZygote:
    """A zygote started in `sandbox` from the worker installed in `folder`, over a channel where the sandbox offers
    one; check `alive` before using it."""
    if hasattr(sandbox, "open_channel"):
        return ChannelZygote(sandbox, workdir, folder, preload, deadline)
    return FileZygote(sandbox, workdir, folder, preload, deadline)


class ChannelZygote:
    """The zygote over an attached command's stdin and stdout (module docstring)."""

    def __init__(self, sandbox, workdir: str, folder: str, preload: list[str], deadline: float) -> None:
        self.channel = None
        try:
            self.channel = sandbox.open_channel(_command("--serve-channel", folder, preload),
                                                timeout=max(1.0, deadline - time.monotonic() + 30), cwd=workdir,
                                                env=ENV, limit=2 * REPLY_LIMIT + FRAME.size + 65536)
            header = self.channel.read(FRAME.size, until=min(time.monotonic() + ZYGOTE_START_S, deadline))
            if header != FRAME.pack(FRAME_MAGIC, READY, 0, 0):
                self.close()
        except (TimeoutError, ChannelError, FailAtlasError, OSError):  # a sandbox that fails shows on the next call
            self.close()

    @property
    def alive(self) -> bool:
        return self.channel is not None

    def call(self, number: int, payload: bytes, left: float) -> tuple[bytes, bool] | None:
        """The reply to call `number` (and whether it timed out). An exchange that breaks (the channel ended or
        carried what is not a frame: the agent's processes can reach it) ends the zygote; the call is answered
        with why. None when the stream itself broke (the Docker API's, not the command's doing): the call is not
        answered, and the caller runs it another way."""
        until = time.monotonic() + left
        try:
            self.channel.send(FRAME.pack(FRAME_MAGIC, REQUEST, number, len(payload)) + payload, until=until)
        except (ChannelError, OSError) as exc:
            self.close()
            return error_reply("WorkerUnavailable", f"the call could not be handed to the sandbox: {exc}"), False
        try:
            while True:
                header = self.channel.read(FRAME.size, until=until)
                if len(header) < FRAME.size:
                    return self._ended()
                magic, kind, got, length = FRAME.unpack(header)
                if magic != FRAME_MAGIC or kind != REPLY or length > REPLY_LIMIT:
                    self.close()
                    return error_reply("MalformedReply", "the call's worker channel carried what the worker does "
                                       "not write (the agent's processes can reach it)"), False
                body = self.channel.read(length, until=until)
                if len(body) < length:
                    return self._ended()
                if got == number:
                    return body, False
                # the late reply of a call that timed out before: skipped
        except TimeoutError:
            with contextlib.suppress(ChannelError, OSError):
                self.channel.send(FRAME.pack(FRAME_MAGIC, CANCEL, number, 0), until=time.monotonic() + 5)
            return error_reply("Timeout", f"the call did not finish within {left:.0f} s"), True
        except ChannelError as exc:
            self.close()
            return error_reply("MalformedReply", str(exc)), False

    def _ended(self) -> tuple[bytes, bool] | None:
        """The channel ended inside a reply: the zygote was killed (by the agent's processes, or for the memory
        they took), or the harness's stream broke (None: not the agent's)."""
        broken = self.channel.broken
        self.close()
        if broken is not None:
            return None
        return error_reply("NoReply", "the agent's process ended the call's worker before it replied"), False

    def close(self) -> None:
        if self.channel is not None:
            channel, self.channel = self.channel, None
            with contextlib.suppress(FailAtlasError, OSError):
                channel.close()


class FileZygote:
    """The zygote over files in its folder (module docstring): one long `exec` in a thread of its own."""

    def __init__(self, sandbox, workdir: str, folder: str, preload: list[str], deadline: float) -> None:
        self.sandbox, self.folder = sandbox, folder
        self._ended = threading.Event()
        timeout = max(1.0, deadline - time.monotonic() + 30)

        def serve() -> None:
            try:
                sandbox.exec(_command("--serve", folder, preload), timeout=timeout, cwd=workdir, env=ENV,
                             output_limit=64 * 1024)
            except Exception:  # noqa: BLE001 - the per-call worker takes over when the zygote is gone
                pass
            finally:
                self._ended.set()

        self._thread = threading.Thread(target=serve, daemon=True, name="failatlas-hidden-zygote")
        self._thread.start()
        until = min(time.monotonic() + ZYGOTE_START_S, deadline)
        pause = 0.02
        while time.monotonic() < until and not self._ended.is_set():
            if self._read(f"{self.folder}/ready") is not None:
                return
            time.sleep(pause)
            pause = min(pause * 1.5, 0.3)
        self.close()  # it did not come up in time: one process per call from here on

    @property
    def alive(self) -> bool:
        return not self._ended.is_set()

    def _read(self, path: str) -> bytes | None:
        try:
            data = self.sandbox.read_file(path, max_bytes=REPLY_LIMIT + 1)
        except InfrastructureError:
            raise
        except (FailAtlasError, OSError, ValueError):
            return None
        return too_large() if len(data) > REPLY_LIMIT else data

    def call(self, number: int, payload: bytes, left: float) -> tuple[bytes, bool]:
        """The reply to call `number` (and whether it timed out)."""
        try:
            write_files = getattr(self.sandbox, "write_files", None)
            if write_files is not None:  # the request, then `go`, in one copy
                write_files(self.folder, [(f"request-{number}.json", payload), (f"go-{number}", b"")])
            else:
                self.sandbox.write_file(f"{self.folder}/request-{number}.json", payload)
                self.sandbox.write_file(f"{self.folder}/go-{number}", b"")
        except InfrastructureError:
            raise
        except (FailAtlasError, OSError, ValueError) as exc:  # an earlier call of the agent's code broke the folder
            return error_reply("WorkerUnavailable", f"the call could not be placed in the sandbox: {exc}"), False
        until, pause = time.monotonic() + left, 0.01
        path = f"{self.folder}/reply-{number}.json"
        while time.monotonic() < until:
            data = self._read(path)
            if data is not None:
                return data, False
            if self._ended.is_set():
                data = self._read(path)
                return (data, False) if data is not None else (error_reply(
                    "NoReply", "the agent's process ended the call's worker before it replied"), False)
            time.sleep(pause)
            pause = min(pause * 1.5, 0.2)
        with contextlib.suppress(FailAtlasError, OSError, ValueError):
            self.sandbox.write_file(f"{self.folder}/cancel-{number}", b"")
        return error_reply("Timeout", f"the call did not finish within {left:.0f} s"), True

    def close(self) -> None:
        if self._thread is None:
            return
        with contextlib.suppress(FailAtlasError, OSError, ValueError):
            self.sandbox.write_file(f"{self.folder}/stop", b"")
        self._thread.join(timeout=15)
        self._thread = None
        self._ended.set()  # stopped, or not stopping: either way it is not used again

"""A command whose standard input and output stay open: one long exchange with one process in a sandbox (the
hidden-test zygote), without a sandbox operation per message.

In Docker every file written into a sandbox or read back is a daemon call (about 55 ms of the host's CPU each, in
dockerd, containerd and runc); a relay that places each request as a file and polls for each reply makes two or more
per call. A channel is one attached `exec`: the harness writes to the command's stdin and reads its stdout as a byte
stream, and what the bytes mean is the caller's protocol (`hidden/relay.py` frames them). Everything the command
prints is the sandbox's, so the harness reads it bounded: stdout is buffered only up to `limit` unread bytes (past
that the channel is `overflowed` and reads fail), stderr keeps a capped head and tail for diagnostics, every read
and write waits at most until the caller's deadline, and `close()` ends the command and whatever it left running.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from failatlas.bench_core.sandbox.output import CappedBuffer

STDERR_LIMIT = 64 * 1024


class ChannelError(Exception):
    """The channel's stream cannot be read any further: the command printed more than the harness buffers unread,
    or a write to its stdin did not drain in time."""


class Channel:
    """The harness's end of one attached command: `send` bytes to its stdin, `read` bytes of its stdout, `close`.
    A sandbox kind makes one with its own `write` (to the command's stdin), `end_input` (close that stdin) and
    `stop` (end the command and what it left running), and feeds it with `start_pump`."""

    def __init__(self, limit: int, *, write: Callable[[bytes], None], end_input: Callable[[], None],
                 stop: Callable[[], None]) -> None:
        self.limit = limit
        self._write, self._end_input, self._stop = write, end_input, stop
        self._buffer = bytearray()
        self._ready = threading.Condition()
        self._ended = False
        self._overflowed = False
        self._closed = False
        self.broken: BaseException | None = None  # why the stream of the command's output broke, if it did
        self.stderr = CappedBuffer(STDERR_LIMIT)

    # the stream, fed by the subclass's pump thread

    def _pump(self, chunks: Iterator[tuple[bytes | None, bytes | None]]) -> None:
        try:
            for out, err in chunks:
                if err:
                    self.stderr.write(err)
                if out:
                    with self._ready:
                        if len(self._buffer) + len(out) > self.limit:
                            self._overflowed = True
                        else:
                            self._buffer += out
                        self._ready.notify_all()
        except Exception as exc:  # noqa: BLE001 - a stream that breaks ends the channel: readers see `ended`
            self.broken = exc  # and `broken`: the harness's stream failed, not the command
        finally:
            with self._ready:
                self._ended = True
                self._ready.notify_all()

    @property
    def ended(self) -> bool:
        """Whether the command's stdout has closed (it ended, or the stream broke)."""
        with self._ready:
            return self._ended

    def read(self, n: int, *, until: float) -> bytes:
        """Exactly `n` bytes of the command's stdout, fewer only when it ended first. Raises TimeoutError past
        `until` (time.monotonic), ChannelError once the command printed more than `limit` bytes unread."""
        with self._ready:
            while len(self._buffer) < n and not self._ended and not self._overflowed:
                left = until - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._ready.wait(left)
            if self._overflowed:
                raise ChannelError(f"the command printed more than {self.limit} bytes the harness had not read")
            data = bytes(self._buffer[:n])
            del self._buffer[:n]
            return data

    def send(self, data: bytes, *, until: float) -> None:
        """Write `data` to the command's stdin. Raises ChannelError when it does not drain by `until`, OSError when
        the stdin is closed."""
        failed: list[BaseException] = []

        def write() -> None:
            try:
                self._write(data)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                failed.append(exc)

        writer = threading.Thread(target=write, daemon=True, name="failatlas-channel-send")
        writer.start()
        writer.join(max(0.0, until - time.monotonic()))
        if writer.is_alive():  # the command does not read its stdin: the caller closes the channel, which frees it
            raise ChannelError("the command did not read what the harness sent it in time")
        if failed:
            raise failed[0] if isinstance(failed[0], OSError) else OSError(str(failed[0]))

    def close(self, *, grace: float = 2.0) -> None:
        """Close the command's stdin, give it `grace` seconds to end by itself, then stop it and everything it
        left running. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._end_input()
        until = time.monotonic() + grace
        with self._ready:
            while not self._ended and time.monotonic() < until:
                self._ready.wait(max(0.0, until - time.monotonic()))
        self._stop()


def start_pump(channel: Channel, chunks: Iterator[tuple[bytes | None, bytes | None]]) -> threading.Thread:
    """Feed `channel` from `chunks` in a daemon thread of its own."""
    thread = threading.Thread(target=channel._pump, args=(chunks,), daemon=True, name="failatlas-channel-read")
    thread.start()
    return thread

"""What a hidden test sees (copied beside the judge as `failatlas_hidden.py`): the `agent` fixture, which runs the
agent's code in the run's sandbox, one worker process per call, and brings back plain data only.

    def test_fit_is_least_squares(agent):
        X, y, _, _ = make_data(seed=1)           # the task's own helper, from the pristine masked repository
        coef = agent.run("from ridge import RidgeRegression\\n"
                         "result = RidgeRegression(alpha=0.0).fit(X, y).coef_", X=X, y=y)
        np.testing.assert_allclose(coef, reference(X, y))   # the assertion runs here, never in the agent's process

`agent.call("module:qualname", *args, **kwargs)` calls a function of the agent's working copy and returns what it
returned; `agent.run(code, **inputs)` runs a snippet there with `inputs` as its variables and returns its variable
`result`. Arguments and results are plain data (`failatlas_wire`): None, bool, int, float, str, lists, dicts with
string keys, numpy arrays and scalars of numeric dtypes and torch tensors (a result's tensor comes back as
`failatlas_wire.TensorData`: `.array`, `.dtype`, `.requires_grad`, `.device`; a result's numpy scalar as the Python
number it holds). An exception in the agent's code, a result that is not plain data,
a crash or a deadline comes back as `AgentError` naming the exception type, the agent's function and the message.
"""

from __future__ import annotations

import os
import struct

import failatlas_wire as wire
import pytest

HEADER = struct.Struct(">cQ")
CALL, DONE = b"C", b"D"
MAX_FRAME = 2 * wire.MAX_BYTES


class AgentError(Exception):
    """The agent's side of one call failed: `exception` (its type name), `object` (`path::qualname` of the agent's
    function it came from, or the call's target) and `message`."""

    def __init__(self, exception: str, object: str, message: str) -> None:  # noqa: A002 - the record's field name
        super().__init__(f"{exception} in {object}: {message}" if message else f"{exception} in {object}")
        self.exception, self.object, self.message = exception, object, message


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the harness closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Channel:
    """Frames to and from the harness, which relays calls to the sandbox: a kind byte, a length, the payload."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self.out_fd, self.in_fd = out_fd, in_fd

    def send(self, kind: bytes, payload: bytes) -> None:
        data = HEADER.pack(kind, len(payload)) + payload
        while data:
            data = data[os.write(self.out_fd, data):]

    def receive(self, label: str) -> bytes:
        """One reply; a frame past MAX_FRAME is read and dropped (the channel stays in step) and fails the call as
        the agent's."""
        kind, size = HEADER.unpack(_read_exact(self.in_fd, HEADER.size))
        if size > MAX_FRAME:
            while size:
                size -= len(_read_exact(self.in_fd, min(size, 1 << 20)))
            raise AgentError("ReplyTooLarge", label, f"a reply of more than {MAX_FRAME} bytes")
        return _read_exact(self.in_fd, size)


def _text(value: object, limit: int = 500) -> str:
    return value[:limit] if isinstance(value, str) else ""


class Agent:
    """The agent's working copy across the boundary (module docstring)."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    def _ask(self, request: dict, label: str):
        self._channel.send(CALL, wire.encode(request))
        raw = self._channel.receive(label)
        try:
            reply = wire.decode(raw)
        except wire.WireError as exc:
            raise AgentError("UnplainResult", label, str(exc)) from None
        if not (isinstance(reply, dict) and isinstance(reply.get("ok"), bool)):
            raise AgentError("MalformedReply", label, "the agent's process sent no readable reply")
        if reply["ok"]:
            return wire.python_scalars(reply.get("value"))
        error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
        raise AgentError(_text(error.get("exception"), 100) or "UnknownError",
                         _text(error.get("object"), 300) or label, _text(error.get("message")))

    def call(self, target: str, *args, **kwargs):
        """Call `module:qualname` of the agent's working copy; its return value (plain data)."""
        if ":" not in target:
            raise ValueError(f"agent.call target {target!r} is not 'module:qualname'")
        return self._ask({"op": "call", "target": target, "args": list(args), "kwargs": kwargs}, target)

    def run(self, code: str, **inputs):
        """Run the snippet `code` in the agent's working copy with `inputs` as variables; its variable `result`."""
        return self._ask({"op": "run", "code": code, "inputs": inputs}, "<hidden test snippet>")


_CHANNEL: Channel | None = None


def connect(out_fd: int, in_fd: int) -> Channel:
    """Open the channel to the harness (the judge runner does this once, before the tests are collected)."""
    global _CHANNEL
    _CHANNEL = Channel(out_fd, in_fd)
    return _CHANNEL


@pytest.fixture
def agent() -> Agent:
    """The agent's working copy, reached only through the sandbox (module docstring)."""
    if _CHANNEL is None:
        raise RuntimeError("the hidden-test judge did not open its channel")
    return Agent(_CHANNEL)

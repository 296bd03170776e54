"""The sandbox side of the hidden-test boundary: one process per call, the only place the agent's code runs.

Copied into the sandbox's working copy (as `.failatlas-hidden-<random>/failatlas_worker.py`) and started there with
`python3 -I -B failatlas_worker.py <request file>` in the working copy, or forked per call by a zygote
(`--serve`, `serve`) that holds the heavy imports. It reads one request (wire data: a call
of `module:qualname` with arguments, or a snippet with inputs), runs it with the working copy first on sys.path,
and prints one line `FAILATLAS_REPLY <wire data>` to the stdout it held before any code of the agent ran (the
agent's prints go to stderr). Nothing it prints is trusted: the judge decodes it as the agent's data and decides.

The zygote talks to the harness one of two ways: through files in its folder (`--serve`: `request-<n>.json`,
`go-<n>`, `reply-<n>.json`, each a sandbox operation of the harness's), or, where the sandbox holds a command's
stdin and stdout open (Docker's attached exec: `--serve-channel`), through frames on them (`FRAME`: magic, kind,
call number, length, then the bytes): the harness sends `Q` (a request) and `C` (cancel call n), the zygote sends
`Y` (ready) and `R` (call n's reply, as the call's process wrote it). Closing its stdin stops it. The agent's
processes run as the same user and can reach the zygote's stdin and stdout through /proc: whatever they write or
take there can only spoil their own run's replies, which are the agent's data already.
"""

import contextlib
import os
import struct
import sys
import traceback

MARKER = "FAILATLAS_REPLY "
FRAME = struct.Struct(">2sBII")  # magic, kind, call number, length of what follows
FRAME_MAGIC = b"FZ"
READY, REQUEST, CANCEL, REPLY = (ord(k) for k in "YQCR")
MAX_REQUEST = 128 * 1024 * 1024


def _object(exc: BaseException, workdir: str, here: str, fallback: str) -> str:
    """`path::qualname` of the innermost frame of the working copy's own code that the exception passed through."""
    found = fallback
    for frame, _line in traceback.walk_tb(exc.__traceback__):
        name = frame.f_code.co_filename
        if not os.path.isabs(name):  # <frozen ...>, <string>, the snippet itself
            continue
        path = os.path.realpath(name)
        if path.startswith(workdir + os.sep) and not path.startswith(here + os.sep):
            name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            found = f"{os.path.relpath(path, workdir)}::{name}"
    return found


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except BaseException:  # noqa: BLE001 - an exception whose str() fails still has a type
        return ""


def _target(spec: str):
    import importlib

    module_name, _, qualname = spec.partition(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split(".") if qualname else []:
        obj = getattr(obj, part)
    return obj


def _read_request(request_file: str) -> bytes:
    with open(request_file, "rb") as handle:
        data = handle.read()
    os.unlink(request_file)
    return data


def _answer(data: bytes, here: str, wire) -> str:
    """Run one request (its wire bytes) with the working copy first on sys.path; the reply's wire text."""
    workdir = os.path.realpath(os.getcwd())
    request = wire.decode(data, torch=True)  # tensors as torch.Tensor: the code called wants them
    sys.path.insert(0, workdir)
    label = request.get("target") or "<hidden test snippet>"
    try:
        if request["op"] == "call":
            value = _target(request["target"])(*request.get("args", []), **request.get("kwargs", {}))
        else:
            namespace = dict(request.get("inputs") or {})
            exec(compile(request["code"], "<hidden test snippet>", "exec"), namespace)  # noqa: S102
            value = namespace.get("result")
        out = {"ok": True, "value": value}
    except BaseException as exc:  # noqa: BLE001 - whatever the agent's code raised is reported, typed
        out = {"ok": False, "error": {"exception": type(exc).__name__,
                                      "object": _object(exc, workdir, here, label),
                                      "message": _message(exc)}}
    try:
        return wire.encode(out).decode("utf-8")
    except BaseException as exc:  # noqa: BLE001 - a result that is not plain data is the agent's failure
        error = {"exception": "UnplainResult", "object": label, "message": _message(exc)[:500]}
        return wire.encode({"ok": False, "error": error}).decode("utf-8")


def _codec():
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path.insert(0, here)
    import failatlas_wire as wire

    sys.path.remove(here)
    return here, wire


def main(request_file: str) -> None:
    """One request in this fresh process; the reply line on the stdout held before the agent's code ran."""
    here, wire = _codec()
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    text = _answer(_read_request(request_file), here, wire)
    reply.write(MARKER + text + "\n")
    reply.flush()
    os._exit(0)


def _write_reply(folder: str, number: int, text: str) -> None:
    path = os.path.join(folder, f"reply-{number}.json")
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


def _child(folder: str, number: int, here: str, wire) -> None:
    """The forked process of one call: its own session, output to a log, the reply to a file."""
    os.setsid()
    log = os.open(os.path.join(folder, f"out-{number}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        text = _answer(_read_request(os.path.join(folder, f"request-{number}.json")), here, wire)
    except BaseException as exc:  # noqa: BLE001 - an unreadable request is answered, never left hanging
        error = {"exception": "BadRequest", "object": "the call", "message": _message(exc)[:300]}
        text = wire.encode({"ok": False, "error": error}).decode("utf-8")
    try:
        _write_reply(folder, number, text)
    finally:
        os._exit(0)


def _imported_by(workdir: str) -> list[str]:
    """Top-level modules the working copy's Python files import (read, never run): at most 500 files and 4 MB of
    source in all."""
    import ast

    names: dict[str, None] = {}
    seen, budget = 0, 4_000_000  # files, and bytes of source parsed in all: the agent's files cannot hold it up
    for folder, dirs, files in os.walk(workdir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for file in files:
            if not file.endswith(".py") or seen >= 500 or budget <= 0:
                continue
            seen += 1
            try:
                with open(os.path.join(folder, file), "rb") as handle:
                    source = handle.read(min(1_000_000, budget))
                budget -= len(source)
                tree = ast.parse(source)
            except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update((alias.name, None) for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names[node.module] = None
        if seen >= 500 or budget <= 0:
            break
    return [n for n in names if n.split(".")[0] not in sys.stdlib_module_names][:100]


def _preload(preload: list[str]) -> None:
    """Import the given modules and the third-party ones the working copy's files import, none it shadows."""
    workdir = os.path.realpath(os.getcwd())
    for name in [*preload, *_imported_by(workdir)]:
        top = name.split(".")[0]
        if os.path.exists(os.path.join(workdir, top + ".py")) or os.path.isdir(os.path.join(workdir, top)):
            continue
        with contextlib.suppress(BaseException):  # one that does not import here is the call's business
            __import__(name)


def serve(folder: str, preload: list[str]) -> None:
    """The zygote: import the codec, numpy and the modules the task's and the working copy's files import
    (third-party ones, never the agent's code, none the working copy shadows), say `ready`, then fork one
    process per request file `request-<n>.json` in order, once `go-<n>` says it is complete; each answers in
    `reply-<n>.json`. `cancel-<n>` kills call n's process group; `stop` ends the zygote. It exists only to spare
    each call the imports: every call is still a fresh process that imports the agent's code itself."""
    import signal
    import time

    here, wire = _codec()
    _preload(preload)
    open(os.path.join(folder, "ready"), "w").close()
    number = 1
    while not os.path.exists(os.path.join(folder, "stop")):
        if not os.path.exists(os.path.join(folder, f"go-{number}")):  # written after the request is complete
            time.sleep(0.005)
            continue
        pid = os.fork()
        if pid == 0:
            _child(folder, number, here, wire)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                if not os.path.exists(os.path.join(folder, f"reply-{number}.json")):
                    why = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
                           else f"exit code {os.WEXITSTATUS(status)}")
                    error = {"exception": "NoReply", "object": "the agent's process",
                             "message": f"the agent's process ended ({why}) before replying"}
                    _write_reply(folder, number, wire.encode({"ok": False, "error": error}).decode())
                break
            if os.path.exists(os.path.join(folder, f"cancel-{number}")) or \
                    os.path.exists(os.path.join(folder, "stop")):
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            time.sleep(0.005)
        number += 1


def _exactly(fd: int, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _frame_in(fd: int):
    """(kind, number, payload) of the next frame on `fd`, or None at its end or at anything that is not a frame."""
    header = _exactly(fd, FRAME.size)
    if len(header) < FRAME.size:
        return None
    magic, kind, number, length = FRAME.unpack(header)
    if magic != FRAME_MAGIC or length > MAX_REQUEST:
        return None
    payload = _exactly(fd, length)
    return (kind, number, payload) if len(payload) == length else None


def _frame_out(fd: int, kind: int, number: int, payload: bytes) -> None:
    data = memoryview(FRAME.pack(FRAME_MAGIC, kind, number, len(payload)) + payload)
    while data:
        data = data[os.write(fd, data):]


def _error_text(wire, exception: str, message: str) -> bytes:
    error = {"exception": exception, "object": "the agent's process", "message": message}
    return wire.encode({"ok": False, "error": error})


def _channel_child(folder: str, number: int, payload: bytes, reply_fd: int, here: str, wire) -> None:
    """The forked process of one call (channel mode): its own session, output to a log, the reply to `reply_fd`."""
    os.setsid()
    log = os.open(os.path.join(folder, f"out-{number}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        text = _answer(payload, here, wire).encode("utf-8")
    except BaseException as exc:  # noqa: BLE001 - an unreadable request is answered, never left hanging
        text = _error_text(wire, "BadRequest", _message(exc)[:300])
    try:
        data = memoryview(text)
        while data:
            data = data[os.write(reply_fd, data):]
    finally:
        os._exit(0)


def _kill_call(pid: int, signal_number: int) -> None:
    """Kill a call's process and its session (it may not have made its own session yet)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal_number)


def _channel_call(folder: str, number: int, payload: bytes, channel: tuple[int, int], here: str,
                  wire, pending: list) -> bytes | None:
    """Run call `number` in a forked process and return its reply (at most wire.MAX_BYTES, else an error reply);
    None when the harness closed the channel meanwhile (the call's process is killed). A request that arrives
    meanwhile is appended to `pending`."""
    import select
    import signal

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        for fd in channel:
            os.close(fd)
        _channel_child(folder, number, payload, write_end, here, wire)
    os.close(write_end)
    parts, size, reading, exited, status = [], 0, True, False, None
    try:
        while True:
            if not exited:
                done, found = os.waitpid(pid, os.WNOHANG)
                exited, status = bool(done), found if done else None
            watched = [channel[0], read_end] if reading else [channel[0]]
            ready = select.select(watched, [], [], 0.0 if exited else 0.05)[0]
            if read_end in ready:
                chunk = os.read(read_end, 1 << 16)
                reading = bool(chunk)
                if size <= wire.MAX_BYTES:
                    parts.append(chunk)
                size += len(chunk)
            if channel[0] in ready:
                frame = _frame_in(channel[0])
                if frame is None:  # closed (or desynchronised by the agent's processes): stop
                    _kill_call(pid, signal.SIGKILL)
                    return None
                if frame[0] == CANCEL and frame[1] == number:
                    _kill_call(pid, signal.SIGKILL)
                elif frame[0] == REQUEST:  # the next call, sent after this one was cancelled: kept for after it
                    pending.append(frame)
            # once the call's process ended: what it wrote is in the pipe; a process it left may hold the pipe
            # open, so read only what is there now, and no more than a reply can be
            if exited and not (reading and read_end in ready and size <= wire.MAX_BYTES):
                break
    finally:
        os.close(read_end)
        if not exited:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    if size > wire.MAX_BYTES:
        return _error_text(wire, "ReplyTooLarge", f"the agent's process wrote more than {wire.MAX_BYTES} bytes "
                           "of reply")
    if size == 0:
        why = (f"killed by signal {os.WTERMSIG(status)}" if status is not None and os.WIFSIGNALED(status)
               else f"exit code {os.WEXITSTATUS(status) if status is not None else '?'}")
        return _error_text(wire, "NoReply", f"the agent's process ended ({why}) before replying")
    return b"".join(parts)


def serve_channel(folder: str, preload: list[str]) -> None:
    """The zygote of `serve`, talking through frames on its stdin and stdout (module docstring)."""
    here, wire = _codec()
    channel_in, channel_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)  # what the imports print goes to stderr, never into the channel
    os.close(null)
    _preload(preload)
    _frame_out(channel_out, READY, 0, b"")
    pending: list = []
    while True:
        frame = pending.pop(0) if pending else _frame_in(channel_in)
        if frame is None:
            return
        kind, number, payload = frame
        if kind != REQUEST:  # a cancel of a call already answered
            continue
        reply = _channel_call(folder, number, payload, (channel_in, channel_out), here, wire, pending)
        if reply is None:
            return
        _frame_out(channel_out, REPLY, number, reply)


def _environment_site() -> None:
    """Put the sandbox user's own site-packages back where Python keeps it, before the system's: `-I` drops it, and
    a task environment built as an image installs there (`pip install --user` as the agent, `build-env`), so the
    agent's code would otherwise be called without the packages its task's environment gives the run itself. A
    judge's sandbox is fresh from its image: that folder holds the environment, nothing an agent wrote."""
    import site

    path = site.getusersitepackages()
    if not isinstance(path, str) or not os.path.isdir(path) or path in sys.path:
        return
    before = list(sys.path)
    site.addsitedir(path)  # the folder and its .pth entries, appended
    added = [p for p in sys.path if p not in before]
    del sys.path[len(before):]
    first = next((i for i, p in enumerate(sys.path) if p.rstrip(os.sep).endswith(("site-packages",
                                                                                  "dist-packages"))), len(sys.path))
    sys.path[first:first] = added


if __name__ == "__main__":
    _environment_site()
    if sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "--serve-channel":
        serve_channel(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1])

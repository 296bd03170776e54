"""The sandbox side of the hidden-test boundary: one process per call, the only place the agent's code runs.

Copied into the sandbox's working copy (as `.failatlas-hidden/failatlas_worker.py`) and started there with
`python3 -I -B failatlas_worker.py <request file>` in the working copy, or forked per call by a zygote
(`--serve`, `serve`) that holds the heavy imports. It reads one request (wire data: a call
of `module:qualname` with arguments, or a snippet with inputs), runs it with the working copy first on sys.path,
and prints one line `FAILATLAS_REPLY <wire data>` to the stdout it held before any code of the agent ran (the
agent's prints go to stderr). Nothing it prints is trusted: the judge decodes it as the agent's data and decides.
"""

import contextlib
import os
import sys
import traceback

MARKER = "FAILATLAS_REPLY "


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


def _answer(request_file: str, here: str, wire) -> str:
    """Run one request with the working copy first on sys.path; the reply's wire text."""
    workdir = os.path.realpath(os.getcwd())
    with open(request_file, "rb") as handle:
        request = wire.decode(handle.read(), torch=True)  # tensors as torch.Tensor: the code called wants them
    os.unlink(request_file)
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
    text = _answer(request_file, here, wire)
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
        text = _answer(os.path.join(folder, f"request-{number}.json"), here, wire)
    except BaseException as exc:  # noqa: BLE001 - an unreadable request is answered, never left hanging
        error = {"exception": "BadRequest", "object": "the call", "message": _message(exc)[:300]}
        text = wire.encode({"ok": False, "error": error}).decode("utf-8")
    try:
        _write_reply(folder, number, text)
    finally:
        os._exit(0)


def _imported_by(workdir: str) -> list[str]:
    """Top-level modules the working copy's Python files import (read, never run), at most 500 files."""
    import ast

    names: dict[str, None] = {}
    seen = 0
    for folder, dirs, files in os.walk(workdir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for file in files:
            if not file.endswith(".py") or seen >= 500:
                continue
            seen += 1
            try:
                with open(os.path.join(folder, file), "rb") as handle:
                    tree = ast.parse(handle.read(1_000_000))
            except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update((alias.name, None) for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names[node.module] = None
    return [n for n in names if n.split(".")[0] not in sys.stdlib_module_names][:100]


def serve(folder: str, preload: list[str]) -> None:
    """The zygote: import the codec, numpy and the modules the task's and the working copy's files import
    (third-party ones, never the agent's code, none the working copy shadows), say `ready`, then fork one
    process per request file `request-<n>.json` in order, once `go-<n>` says it is complete; each answers in
    `reply-<n>.json`. `cancel-<n>` kills call n's process group; `stop` ends the zygote. It exists only to spare
    each call the imports: every call is still a fresh process that imports the agent's code itself."""
    import signal
    import time

    here, wire = _codec()
    workdir = os.path.realpath(os.getcwd())
    for name in [*preload, *_imported_by(workdir)]:
        top = name.split(".")[0]
        if os.path.exists(os.path.join(workdir, top + ".py")) or os.path.isdir(os.path.join(workdir, top)):
            continue
        with contextlib.suppress(BaseException):  # one that does not import here is the call's business
            __import__(name)
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
    else:
        main(sys.argv[1])

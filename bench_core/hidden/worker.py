"""The sandbox side of the hidden-test boundary: one process per call, the only place the agent's code runs.

Copied into the sandbox's working copy (as `.failatlas-hidden/failatlas_worker.py`) and started there with
`python3 -I -B failatlas_worker.py <request file>` in the working copy. It reads one request (wire data: a call
of `module:qualname` with arguments, or a snippet with inputs), runs it with the working copy first on sys.path,
and prints one line `FAILATLAS_REPLY <wire data>` to the stdout it held before any code of the agent ran (the
agent's prints go to stderr). Nothing it prints is trusted: the judge decodes it as the agent's data and decides.
"""

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


def main(request_file: str) -> None:
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path.insert(0, here)
    import failatlas_wire as wire

    sys.path.remove(here)
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    workdir = os.path.realpath(os.getcwd())
    with open(request_file, "rb") as handle:
        request = wire.decode(handle.read())
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
        text = wire.encode(out).decode("utf-8")
    except BaseException as exc:  # noqa: BLE001 - a result that is not plain data is the agent's failure
        error = {"exception": "UnplainResult", "object": label, "message": _message(exc)[:500]}
        text = wire.encode({"ok": False, "error": error}).decode("utf-8")
    reply.write(MARKER + text + "\n")
    reply.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])

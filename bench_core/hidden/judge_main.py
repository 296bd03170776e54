"""The hidden-test judge (copied as `failatlas_judge.py`): pytest over the task's hidden tests in a host process
that never imports the agent's code. Started with `python3 -I -B failatlas_judge.py <out fd> <in fd> <tests>
[<pristine repository>]`: sys.path holds this folder and the pristine masked repository (the task's own helpers,
such as data generation, without the agent's diff); `--noconftest`, our own ini file and
PYTEST_DISABLE_PLUGIN_AUTOLOAD keep every other file out. The agent's code is reached only through the `agent`
fixture, whose calls the harness relays to the sandbox. The assertions, the counting and the result (one `D` frame
on the channel) are all here.
"""

import os
import re
import sys

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _line(text: str, limit: int = 300) -> str:
    """The first line of `text`, control characters out, cut at a word boundary within `limit` characters."""
    text = _CONTROL.sub(" ", (text or "").strip().split("\n", 1)[0]).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else text[:limit]).rstrip(" ,;:") + " ..."


def main(out_fd: int, in_fd: int, tests: str, pristine: str) -> int:
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:0] = [here] + ([pristine] if pristine else [])
    import json

    import failatlas_hidden as hidden
    import pytest

    channel = hidden.connect(out_fd, in_fd)
    passed, failures, errors = [], [], []

    def failure(test: str, excinfo) -> dict:
        exc = excinfo.value if excinfo is not None else None
        if isinstance(exc, hidden.AgentError):
            return {"test": test, "exception": _line(exc.exception, 100), "object": _line(exc.object, 200),
                    "message": _line(exc.message)}
        if exc is None:
            return {"test": test, "exception": "Failed", "object": None, "message": ""}
        text = excinfo.exconly()
        prefix = f"{type(exc).__module__}.{type(exc).__qualname__}: "
        text = text[len(prefix):] if text.startswith(prefix) else text.split(": ", 1)[-1]
        return {"test": test, "exception": type(exc).__name__, "object": None, "message": _line(text)}

    class Collect:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            report = outcome.get_result()
            name = item.nodeid.split("::", 1)[-1]
            if report.failed:
                failures.append(failure(name, call.excinfo))
            elif report.when == "call" and report.passed:
                passed.append(name)
            elif report.skipped and report.when in ("setup", "call"):
                failures.append({"test": name, "exception": "Skipped", "object": None,
                                 "message": "a hidden test may not skip"})

        def pytest_collectreport(self, report):
            if report.failed:
                errors.append(_line(report.longreprtext.strip().splitlines()[-1] if report.longreprtext else "", 500))

    code = pytest.main(["-q", "-c", os.path.join(here, "pytest.ini"), "--rootdir", here, "--noconftest",
                        "-p", "no:cacheprovider", "-p", "no:stepwise", tests], plugins=[hidden, Collect()])
    result = {"passed": passed, "failures": failures, "collection_errors": errors, "exit_code": int(code)}
    channel.send(hidden.DONE, json.dumps(result).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else ""))

"""One failure, read from a log or a test report, classified by the run's evidence into a statement with facets.

`read_exception` finds the exception a log ends with (its class, message and the deepest frame in the repository);
`classify` turns one exception into (kind, object, statement) using `ingest.evidence`. Statements are fixed
sentences around backquoted objects: never a log line, never cut inside a word; the full log stays beside them in
`insight_sources.detail`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from failatlas.ingest.evidence import RunEvidence, TaskEvidence, classify_module, install_refused, locate
from failatlas.ingest.infer import SIGNATURE_KINDS
from failatlas.ingest.signatures import error_signatures, mask_message

_FRAME = re.compile(r'File "(?P<path>[^"\n]{1,500})", line (?P<line>\d{1,9}), in (?P<func>[\w<>.]{1,200})')
_PYTEST_FRAME = re.compile(
    r"(?P<path>[\w./-]{1,500}\.py):(?P<line>\d{1,9}):\s*(?:in (?P<func>[\w<>.]{1,200})|(?P<exc>[A-Z]\w{0,99}))")
_EXCEPTION_LINE = re.compile(
    r"^(?:E\s+)?(?:[A-Za-z_]\w{0,99}\.){0,20}(?P<exc>[A-Z]\w{0,99}(?:Error|Exception|Exit|Interrupt|Failure))\b"
    r"(?::\s*(?P<msg>.*))?$")
_NO_MODULE = re.compile(r"No module named ['\"]?(?P<module>[\w.]{1,200})\b['\"]?")
_CANNOT_IMPORT = re.compile(
    r"cannot import name ['\"]?(?P<name>\w{1,200})\b['\"]?(?: from ['\"]?(?P<module>[\w.]{1,200})\b['\"]?)?")
_NO_ATTRIBUTE = re.compile(r"module ['\"](?P<module>[\w.]{1,200})['\"] has no attribute ['\"](?P<name>\w{1,200})['\"]")
_SCRIPT = re.compile(r"can't open file ['\"]?(?P<path>[^'\"]+?)['\"]?: \[Errno 2\]")
_NOT_REPO = ("site-packages", "dist-packages", "/usr/lib/python", "<frozen", "/failatlas-judge/", "/_pytest/",
             "/pluggy/")
MESSAGE_WORDS = 12
MAX_WORD_CHARS = 60  # a longer "word" (a hostile or generated value) is named, never quoted or cut


@dataclass
class Exc:
    """The exception a log or test report shows: class, message, and where in the repository it was raised."""

    name: str | None
    message: str = ""
    file: str | None = None  # path relative to the repository
    function: str | None = None
    in_test: bool = False  # raised in the hidden test's own code
    line: str = ""  # the log line that names it, as evidence
    qualname: str | None = None  # the full qualname, where a structured report names it
    line_no: int | None = None  # the line in `file`, where only that is known (pytest's `file:line: Error`)


@dataclass
class Statement:
    """One failure as stored: the sentence, its kind and object, and the evidence behind it."""

    kind: str
    object: str | None
    text: str
    detail: dict[str, Any] = field(default_factory=dict)


def repo_path(path: str) -> str | None:
    """A traceback path relative to the repository (the sandbox's /workspace), None for the interpreter's own."""
    if any(marker in path for marker in _NOT_REPO):
        return None
    if "/workspace/" in path:
        return path.split("/workspace/", 1)[1]
    return path.lstrip("./") if not path.startswith("/") else path.rsplit("/", 1)[-1]


def read_exception(log: str | None) -> Exc | None:
    """The last exception `log` shows, with its deepest repository frame; None when it shows none."""
    if not log:
        return None
    lines = log.splitlines()
    found: Exc | None = None
    for index in range(len(lines) - 1, -1, -1):
        match = _EXCEPTION_LINE.match(lines[index].strip())
        if match:
            found = Exc(match.group("exc"), (match.group("msg") or "").strip(), line=lines[index].strip())
            head = lines[:index]
            break
    if found is None:
        signatures = error_signatures(log)
        if not signatures:
            return None
        last = signatures[-1]
        return Exc(None, last.line, line=last.line)
    for line in reversed(head):
        frame = _FRAME.search(line) or _PYTEST_FRAME.search(line)
        if frame:
            path = repo_path(frame.group("path"))
            if path is not None:
                found.file, found.function = path, frame.groupdict().get("func")
                break
            if "/failatlas-judge/" in frame.group("path"):
                found.in_test = True
                break
    return found


def short_message(message: str) -> str:
    """An exception message as a statement quotes it: numbers and paths masked, at most MESSAGE_WORDS whole words,
    none longer than MAX_WORD_CHARS."""
    words = [w if len(w) <= MAX_WORD_CHARS else "<long token>" for w in mask_message(message).split()]
    cut = " ".join(words[:MESSAGE_WORDS])
    return cut + (" …" if len(words) > MESSAGE_WORDS else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def classify(exc: Exc, evidence: RunEvidence, *, where: str) -> Statement:
    """The statement for one exception; `where` says what failed ("the re-run", "hidden tests")."""
    text = f"{exc.line}\n{exc.message}"
    module = _NO_MODULE.search(text)
    if module:
        return module_statement(module.group("module"), evidence)
    cannot = _CANNOT_IMPORT.search(text)
    if cannot:
        return _import_name(cannot.group("name"), cannot.group("module"), evidence)
    attribute = _NO_ATTRIBUTE.search(text)
    if attribute and _own_module(attribute.group("module"), attribute.group("name"), evidence.task):
        return _import_name(attribute.group("name"), attribute.group("module"), evidence)
    script = _SCRIPT.search(text)
    if script:
        path = repo_path(script.group("path")) or script.group("path")
        if path in evidence.task.masked_files or path.removesuffix(".py") in evidence.task.repo_modules:
            return Statement("module_not_created", path, f"File `{path}` that the run command needs was never created")
        return Statement("no_output", path, f"File `{path}` that the run command needs does not exist")
    if exc.name == "NotImplementedError":
        obj, masked = locate(exc.file, exc.function, evidence.task, assume_masked=True)
        if masked or not evidence.task.maskable and not evidence.task.masked_files:
            what = "Masked function" if masked and obj and "::" in obj else "Masked code" if masked else "Function"
            return Statement("unimplemented", obj, f"{what} `{obj}` left unimplemented (NotImplementedError)"
                             if obj else "Code left unimplemented (NotImplementedError)")
    kind = _signature_kind(text)
    if kind in ("budget_exhausted", "network_refused", "environment_incompatible", "dependency_not_installed"):
        return Statement(kind, None, _fixed_text(kind, text))
    obj, _ = locate(exc.file, exc.function, evidence.task)
    name = exc.name or "error"
    message = short_message(exc.message) if exc.name else ""
    where_text = f" in `{obj}`" if obj else f" in {where}"
    return Statement("crash", obj, f"{name}{where_text}" + (f" ({message})" if message else ""))


def _signature_kind(text: str) -> str | None:
    for signature in error_signatures(text):
        return SIGNATURE_KINDS.get(signature.key)
    return None


_FIXED = {
    "budget_exhausted": "Ran out of time or memory",
    "network_refused": "Network access refused while running",
    "environment_incompatible": "Environment incompatible with the code (CUDA, tool or version)",
    "dependency_not_installed": "A required package could not be installed",
}


def _fixed_text(kind: str, text: str) -> str:
    for signature in error_signatures(text):
        if signature.key == "command_not_found":
            return f"Command `{signature.detail['command']}` is not installed"
        if signature.key in ("cuda_oom", "host_oom"):
            return "Ran out of GPU memory" if signature.key == "cuda_oom" else "Ran out of host memory"
        if signature.key == "timeout":
            return "Did not finish within the time limit"
        if signature.key == "package_install" and signature.detail.get("requirement"):
            return f"Package `{signature.detail['requirement']}` could not be installed"
        if signature.key in ("no_gpu", "cuda_error"):
            return "A GPU or CUDA setup the code needs is missing or mismatched"
    return _FIXED[kind]


def module_statement(module: str, evidence: RunEvidence) -> Statement:
    """The statement for a module that could not be imported, classified by where it should have come from."""
    found = classify_module(module, evidence)
    detail = {"module": module, "network_policy": evidence.network}
    if found.kind == "module_not_created":
        return Statement(found.kind, module, f"Module `{module}` {found.why} was never created", detail)
    if found.kind == "dependency_not_installed":
        package = found.package or module
        named = f"Package `{package}`" + (f" (module `{module}`)" if package != module.split(".")[0] else "")
        refused = install_refused(evidence, package)
        tail = f" and the network policy `{evidence.network}` refused its install" if refused else ""
        return Statement(found.kind, package, f"{named} is not installed{tail}", {**detail, "install_refused": refused})
    return Statement(found.kind, module, f"Module `{module}` could not be imported: {found.why}", detail)


def _own_module(module: str, name: str, task: TaskEvidence) -> bool:
    """Whether `module` is the repository's own (or `module.name` is what the task's tests import from it)."""
    return module.split(".")[0] in task.repo_modules | task.masked_modules or f"{module}.{name}" in task.test_imports


def _import_name(name: str, module: str | None, evidence: RunEvidence) -> Statement:
    if module is None or _own_module(module, name, evidence.task):
        obj = f"{module}.{name}" if module else name
        return Statement("unimplemented", obj, f"`{name}` that the task asks for is missing from module `{module}`"
                         if module else f"`{name}` that the task asks for was never written")
    classified = classify_module(module, evidence)
    if classified.kind == "dependency_not_installed":
        return Statement("environment_incompatible", classified.object,
                         f"Installed package `{classified.object}` has no `{name}` (version mismatch)")
    return Statement("crash", f"{module}.{name}", f"`{name}` cannot be imported from module `{module}`")


def sep_free(obj: str) -> bool:
    """Whether an object is prose ("the agent's process") rather than a module or file name."""
    return not re.fullmatch(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*", obj)


def hidden_failure(item: Any) -> tuple[str, Exc]:
    """(test name, exception) of one hidden-test failure: a structured dict {test, exception, object, message} or
    the older string `hidden test <name>: <last line>` / `hidden test collection: <text>`."""
    if isinstance(item, dict):
        test = str(item.get("test") or "collection")
        obj = str(item.get("object") or "")
        file, _, function = obj.partition("::")
        message = str(item.get("message") or "")
        exc = Exc(str(item.get("exception") or "") or None, message, line=f"{item.get('exception')}: {message}")
        if file.endswith(".py"):
            exc.file, exc.function = file, function.rsplit(".", 1)[-1] if function else None
            exc.qualname = function or None
        elif obj and not sep_free(obj):
            exc.file = obj.replace(".", "/") + ".py"  # a module the agent's code is in
        exc.in_test = bool(item.get("in_test"))
        return test, exc
    text = str(item)
    name, _, rest = text.removeprefix("hidden test ").partition(": ")
    exc = read_exception(rest) or Exc(None, rest, line=rest)
    frame = _PYTEST_FRAME.search(rest)
    if frame and exc.file is None:
        path = frame.group("path")
        if path.rsplit("/", 1)[-1].startswith("test_") or "/failatlas-judge/" in path:
            exc.in_test = True
        else:
            exc.file = repo_path(path)
            exc.line_no = int(frame.group("line"))
        if frame.group("exc") and not exc.name:  # pytest's `file:line: Error` names no message
            exc.name, exc.message = frame.group("exc"), ""
    if exc.name is None:
        named = re.search(r"\b([A-Z]\w*(?:Error|Exception))\b", rest)
        exc.name = named.group(1) if named else None
    return name, exc


def under_test(evidence: RunEvidence) -> str | None:
    """The one part the hidden tests exercise, when the task names exactly one: a masked file or the file of its
    masked functions."""
    files = {f for f in evidence.task.masked_files if f.endswith(".py")} | set(evidence.task.maskable)
    return next(iter(files)) if len(files) == 1 else None


_DERIVED = ("CalledProcessError",)


def hidden_statements(failures: list[Any], evidence: RunEvidence, fallback: Statement | None = None
                      ) -> list[Statement]:
    """One statement per distinct failure of the hidden tests (same kind, object and exception), counting tests.

    A test whose failure names no cause of its own (the experiment it ran as a subprocess failed) counts toward
    the run's other failure in the tests; alone, it takes `fallback` (the clean re-run's failure), else is a crash.
    """
    groups: dict[tuple[str, str | None, str], tuple[Statement, list[str]]] = {}
    derived: list[str] = []
    for item in failures:
        test, exc = hidden_failure(item)
        if exc.file and not exc.function and exc.line_no is not None:  # the re-run's traceback names the function
            exc.function = evidence.frames.get((exc.file, exc.line_no))
        if exc.name in _DERIVED and exc.file is None:
            derived.append(test)
            continue
        if exc.name in ("AssertionError", "Failed") and (exc.in_test or exc.file is None):  # the test's own check
            obj = f"{exc.file}::{exc.qualname}" if exc.qualname else under_test(evidence)
            statement = Statement("wrong_value", obj, "")
        elif exc.name == "KeyError" and (exc.in_test or exc.file is None) and _key(exc) in evidence.task.metrics:
            statement = Statement("no_output", _key(exc), f"Metric `{_key(exc)}` was not reported")
        elif exc.name is None and "did not finish within" in str(item):
            statement = Statement("budget_exhausted", None, "Hidden tests did not finish within the time limit")
        elif exc.name is None and "did not run to the end" in str(item):
            statement = Statement("crash", None, "Hidden tests did not run to the end")
        elif exc.name is None and "forged" in str(item):
            statement = Statement("monitor_violation", None, "A hidden-test result was forged")
        else:
            statement = classify(exc, evidence, where="hidden tests")
        key = (statement.kind, statement.object, exc.name or "")
        if key not in groups:
            groups[key] = (statement, [])
        groups[key][1].append(test)
    if derived:
        if groups:
            largest = max(groups, key=lambda k: len(groups[k][1]))
            groups[largest][1].extend(derived)
        else:
            base = fallback or Statement("crash", None, "The experiment the hidden tests run fails")
            groups[(base.kind, base.object, "")] = (Statement(base.kind, base.object, base.text), derived)
    out = []
    for (kind, obj, exc_name), (statement, tests) in groups.items():
        n = _plural(len(tests), "hidden test") if tests != ["collection"] else "collecting the hidden tests"
        if kind == "wrong_value":
            target = f"`{obj}`" if obj else "the code under test"
            statement.text = f"Hidden tests find wrong values in {target} ({exc_name} in {n})"
        elif kind == "crash" and exc_name and tests != ["collection"]:
            statement.text = f"{statement.text} in {n}"
        elif kind == "no_output" and exc_name == "KeyError":
            statement.text = f"{statement.text} (KeyError in {n})"
        elif kind == "unimplemented" and exc_name == "NotImplementedError":
            statement.text = statement.text.replace("(NotImplementedError)", f"(NotImplementedError in {n})")
        statement.detail = {**statement.detail, "tests": tests, "exception": exc_name or None,
                            "failures": [f if isinstance(f, dict) else str(f) for f in failures][:20]}
        out.append(statement)
    return out


def _key(exc: Exc) -> str:
    """The key a KeyError names (`'accuracy'` -> `accuracy`)."""
    return exc.message.strip().strip("'\"")


def log_frames(log: str | None) -> dict[tuple[str, int], str]:
    """(file, line) -> function of every repository frame a traceback in `log` shows."""
    found: dict[tuple[str, int], str] = {}
    for match in _FRAME.finditer(log or ""):
        path = repo_path(match.group("path"))
        if path is not None:
            found[(path, int(match.group("line")))] = match.group("func")
    return found

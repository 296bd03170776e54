"""Execution logs reduced to normalised error signatures.

Each pattern in `SIGNATURE_PATTERNS` turns a log line into a signature with a readable, fixed insight text
and the variable part (module, path, exception message) kept as detail. So every
`ModuleNotFoundError: No module named 'x'` becomes one insight, "Execution failed: required Python module is
not installed", with `{"module": "x"}` telling the occurrences apart. Patterns are tried in order per line;
the first that matches wins. The last one is a catch-all for any `SomethingError: message` line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_HEX = re.compile(r"\b[0-9a-f]{8,}\b", re.IGNORECASE)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
_TMP = re.compile(r"/tmp/[^/\s'\"]+")
MAX_LINE_CHARS = 1000
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def mask_path(path: str) -> str:
    """A path with what varies between sandboxes (temp folders, hashes, uuids) replaced by placeholders."""
    path = _UUID.sub("<uuid>", path)
    path = _TMP.sub("/tmp/<tmp>", path)
    return _HEX.sub("<hex>", path)


def mask_message(message: str) -> str:
    """An error message with numbers, hashes and temp paths masked, trimmed to 200 characters."""
    return _NUMBER.sub("<n>", mask_path(message.strip()))[:200]


@dataclass(frozen=True)
class Signature:
    """One normalised error: `key` names the kind, `text` is the insight, `detail` what varies."""

    key: str
    text: str
    detail: dict[str, Any] = field(default_factory=dict)
    line: str = ""

    @property
    def identity(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.key, tuple(sorted((k, str(v)) for k, v in self.detail.items()))


@dataclass(frozen=True)
class SignaturePattern:
    """A regular expression over one log line, the insight it stands for and how to pull its detail."""

    key: str
    regex: re.Pattern[str]
    text: str | Callable[[re.Match[str]], str]
    detail: Callable[[re.Match[str]], dict[str, Any]] = lambda m: {}

    def signature(self, match: re.Match[str], line: str) -> Signature:
        text = self.text(match) if callable(self.text) else self.text
        detail = {k: v for k, v in self.detail(match).items() if v not in (None, "")}
        return Signature(key=self.key, text=text, detail=detail, line=line.strip()[:300])


def _p(
    key: str,
    pattern: str,
    text: str | Callable[[re.Match[str]], str],
    detail: Callable[[re.Match[str]], dict[str, Any]] = lambda m: {},
    flags: int = 0,
) -> SignaturePattern:
    return SignaturePattern(key, re.compile(pattern, flags), text, detail)


def _group(
    name: str, masker: Callable[[str], str] = lambda s: s
) -> Callable[[re.Match[str]], dict[str, Any]]:
    return lambda m: {name: masker(m.group(name))} if m.group(name) else {}


SIGNATURE_PATTERNS: tuple[SignaturePattern, ...] = (
    _p(
        "missing_module",
        r"(?:ModuleNotFoundError|ImportError): No module named ['\"]?(?P<module>[\w.]+)['\"]?",
        "Execution failed: required Python module is not installed",
        lambda m: {"module": m.group("module")},
    ),
    _p(
        "import_name",
        r"ImportError: cannot import name ['\"]?(?P<name>\w+)['\"]?(?: from ['\"]?(?P<module>[\w.]+)['\"]?)?",
        "Execution failed: a name could not be imported from an installed module (API or version mismatch)",
        lambda m: {"name": m.group("name"), "module": m.group("module")},
    ),
    _p(
        "no_gpu",
        r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|no CUDA-capable device"
        r"|No CUDA GPUs are available|CUDA driver version is insufficient",
        "Execution failed: a GPU was required but none was available",
    ),
    _p(
        "cuda_oom",
        r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|CUDA error: out of memory",
        "Execution failed: GPU ran out of memory (CUDA OOM)",
    ),
    _p(
        "cuda_error",
        r"CUDA error: (?P<error>.+)",
        "Execution failed with a CUDA error",
        _group("error", mask_message),
    ),
    _p(
        "host_oom",
        r"\bMemoryError\b|Cannot allocate memory|std::bad_alloc|^\s*Killed\s*$"
        r"|exit(?:ed)? (?:code|status) 137",
        "Execution failed: the process ran out of host memory or was killed",
    ),
    _p(
        "script_not_found",
        r"can't open file ['\"]?(?P<path>[^'\"]+?)['\"]?: \[Errno 2\]",
        "Execution failed: the script to run does not exist",
        _group("path", mask_path),
    ),
    _p(
        "file_not_found",
        r"(?:FileNotFoundError|IOError|OSError): \[Errno 2\] No such file or directory: "
        r"['\"](?P<path>[^'\"]+)['\"]"
        r"|(?P<path2>[^\s:'\"]+): No such file or directory",
        "Execution failed: a required file or directory does not exist",
        lambda m: {"path": mask_path(m.group("path") or m.group("path2"))},
    ),
    _p(
        "not_implemented",
        r"NotImplementedError(?::\s*(?P<message>.*))?",
        "Execution failed: code path left unimplemented (NotImplementedError)",
        _group("message", mask_message),
    ),
    _p(
        "shape_mismatch",
        r"size mismatch|shape mismatch|shapes cannot be multiplied|must match the size of tensor"
        r"|could not be broadcast|cannot reshape array|is invalid for input of size|Expected input batch_size"
        r"|Sizes of tensors must match|dimension mismatch"
        r"|shapes? .{0,40}(?:not aligned|do not match|don't match)",
        "Execution failed: tensor or array shapes do not match",
        lambda m: {"message": mask_message(m.string)},
        re.IGNORECASE,
    ),
    _p(
        "device_mismatch",
        r"Expected all tensors to be on the same device|Expected object of device type"
        r"|Input type \(.*\) and weight type \(.*\) should be the same",
        "Execution failed: tensors are on different devices or of different types",
    ),
    _p(
        "timeout",
        r"\bTimeoutError\b|\bTimeoutExpired\b|\btimed out\b|deadline exceeded|\btime limit exceeded\b",
        "Execution did not finish within the time limit",
        flags=re.IGNORECASE,
    ),
    _p(
        "command_not_found",
        r"(?P<command>[\w.+-]+): command not found|/bin/sh: \d+: (?P<command2>[\w.+-]+): not found",
        "Execution failed: a required command-line tool is not installed",
        lambda m: {"command": m.group("command") or m.group("command2")},
    ),
    _p(
        "package_install",
        r"Could not find a version that satisfies the requirement (?P<req>\S+)"
        r"|No matching distribution found for (?P<req2>\S+)",
        "Environment setup failed: a Python package could not be installed",
        lambda m: {"requirement": m.group("req") or m.group("req2")},
    ),
    _p(
        "network",
        r"Temporary failure in name resolution|Name or service not known|Max retries exceeded with url"
        r"|Could not resolve host|Network is unreachable|Connection refused",
        "Execution failed: network access was needed but unavailable",
    ),
    _p("permission", r"PermissionError|Permission denied", "Execution failed: permission denied"),
    _p(
        "syntax_error",
        r"(?P<kind>SyntaxError|IndentationError|TabError): (?P<message>.+)",
        "Execution failed: the code has a syntax error",
        _group("message", mask_message),
    ),
    _p(
        "undefined_name",
        r"NameError: name ['\"](?P<name>\w+)['\"] is not defined",
        "Execution failed: a name is used but never defined",
        _group("name"),
    ),
    _p(
        "missing_attribute",
        r"AttributeError: (?:module )?['\"]?(?P<owner>[\w.]+)['\"]? (?:object )?"
        r"has no attribute ['\"](?P<attr>\w+)",
        "Execution failed: an object or module has no such attribute (API mismatch)",
        lambda m: {"owner": m.group("owner"), "attribute": m.group("attr")},
    ),
    _p(
        "bad_arguments",
        r"TypeError: (?P<function>[\w.]+)\(\) (?:got an unexpected keyword argument|missing \d+ required"
        r"|takes \d+ positional arguments? but|got multiple values for)",
        "Execution failed: a function was called with the wrong arguments",
        _group("function"),
    ),
    _p(
        "nan",
        r"\bnan\b (?:loss|values?)|loss (?:is|became) nan|contains? NaN",
        "Execution produced NaN values",
        flags=re.IGNORECASE,
    ),
    _p(
        "key_error",
        r"KeyError: (?P<key>.+)",
        "Execution failed: a missing key was looked up (KeyError)",
        _group("key", mask_message),
    ),
    _p(
        "assertion",
        r"AssertionError(?::\s*(?P<message>.*))?",
        "Execution failed: an assertion in the code failed",
        _group("message", mask_message),
    ),
    _p(
        "exception",
        r"^\s*(?:[\w]+\.)*(?P<kind>[A-Z]\w*(?:Error|Exception)):\s*(?P<message>.*)$",
        lambda m: f"Execution failed with an uncaught {m.group('kind')}",
        _group("message", mask_message),
    ),
)


def error_signatures(log: str | None) -> list[Signature]:
    """The distinct error signatures in a log (stderr tail, traceback), in order of first appearance."""
    if not log:
        return []
    found: list[Signature] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for line in log.splitlines():
        if not line.strip():
            continue
        line = line[:MAX_LINE_CHARS]  # an error line is short: a longer one (a hostile message) is matched by its head
        for pattern in SIGNATURE_PATTERNS:
            match = pattern.regex.search(line)
            if match:
                signature = pattern.signature(match, line)
                if signature.identity not in seen:
                    seen.add(signature.identity)
                    found.append(signature)
                break
    return found

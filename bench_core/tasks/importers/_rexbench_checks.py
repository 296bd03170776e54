"""The RExBench checks file: execution checks a user supplies per task (RExBench publishes no expected values).

Format (YAML or JSON; documented in `rexbench.py` and docs/benchmarks.md): task name or id -> a list of checks, or
`{command, timeout_s, checks}`. Every field is checked before a model is built, so an error names the checks file,
its line and the field (`cogs.checks[0].pattern`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from failatlas.bench_core.tasks.importers._common import load_json, load_yaml, read_text
from failatlas.bench_core.tasks.model import OutputCheck
from failatlas.core.errors import InputError
from failatlas.core.paths import relative_path

INSTRUCTIONS = "instructions.md"


def rexbench_id(name: str) -> str:
    """The task id of RExBench task folder `name`."""
    return "rexbench-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._") or "task")

_CHECK_NEEDS = {"stdout_regex": ("pattern",), "csv_column": ("file", "column"), "json_field": ("file", "field")}
_TASK_KEYS = frozenset({"command", "timeout_s", "checks"})


@dataclass(frozen=True)
class TaskChecks:
    """What a checks file gives one task: its checks, and the command and time limit where it names them."""

    checks: list[OutputCheck]
    command: str | None = None
    timeout_s: int | None = None


class _ChecksFile:
    """A checks file, read once: its data, and the text to find the line of a field in."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.text = read_text(self.path)
        self.data = load_json(self.path, self.text) if self.path.suffix.lower() == ".json" else load_yaml(self.path)
        if not isinstance(self.data, dict) or not all(isinstance(k, str) for k in self.data):
            raise InputError("must map task names (or ids) to lists of checks", path=str(self.path))

    def error(self, message: str, where: list[str | int]) -> InputError:
        return InputError(message, path=str(self.path), line=self.line(where), field=_field_name(where))

    def line(self, where: list[str | int]) -> int | None:
        """The line of the deepest part of `where` found in the file (None where YAML cannot compose it)."""
        try:
            node = yaml.compose(self.text, Loader=yaml.SafeLoader)
        except (yaml.YAMLError, RecursionError):
            return None
        line = None
        for key in where:
            if isinstance(node, yaml.MappingNode):
                pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == key), None)
                if pair is None:
                    break
                line, node = pair[0].start_mark.line + 1, pair[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
                node = node.value[key]
                line = node.start_mark.line + 1
            else:
                break
        return line


def _field_name(where: list[str | int]) -> str:
    name = ""
    for key in where:
        name += f"[{key}]" if isinstance(key, int) else (f".{key}" if name else str(key))
    return name


def checks_for(path: Path, folder: Path, name: str, task_id: str) -> TaskChecks | None:
    """The checks file's entry for the task in `folder` (by `name` or `task_id`), None when it has none. Every
    key must name a RExBench task folder beside `folder` (or this task); InputError naming file, line, field."""
    checks = _ChecksFile(path)
    known = {name, task_id}
    for sibling in folder.parent.iterdir():
        try:
            if (sibling / INSTRUCTIONS).is_file():
                known |= {sibling.name, rexbench_id(sibling.name)}
        except OSError:
            continue
    for key in checks.data:
        if key not in known:
            raise checks.error(f"names no RExBench task beside {folder} (known: {', '.join(sorted(known))})", [key])
    keys = [key for key in checks.data if key in (name, task_id)]
    if len(keys) > 1:
        raise checks.error(f"task {task_id} is named twice, as {' and '.join(repr(k) for k in keys)}", [keys[1]])
    return _task_checks(checks, keys[0]) if keys else None


def _task_checks(checks: _ChecksFile, key: str) -> TaskChecks:
    entry = checks.data[key]
    if isinstance(entry, list):
        return TaskChecks(checks=_check_list(checks, entry, [key]))
    if not isinstance(entry, dict):
        raise checks.error("must be a list of checks, or an object with command, timeout_s and checks", [key])
    unknown = sorted(set(entry) - _TASK_KEYS)
    if unknown:
        raise checks.error(f"unknown key; a task takes {', '.join(sorted(_TASK_KEYS))}", [key, unknown[0]])
    command = entry.get("command")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise checks.error("must be the command line that runs the evaluation", [key, "command"])
    timeout = entry.get("timeout_s")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0):
        raise checks.error("must be a positive number of seconds", [key, "timeout_s"])
    listed = entry.get("checks") or []
    if not isinstance(listed, list):
        raise checks.error("must be a list of checks", [key, "checks"])
    return TaskChecks(_check_list(checks, listed, [key, "checks"]), command.strip() if command else None, timeout)


def _check_list(checks: _ChecksFile, entries: list[Any], where: list[str | int]) -> list[OutputCheck]:
    built: list[OutputCheck] = []
    for i, entry in enumerate(entries):
        check = _check(checks, entry, [*where, i])
        if any(c.name == check.name for c in built):
            raise checks.error(f"a second check named {check.name!r}", [*where, i, "name"])
        built.append(check)
    return built


def _check(checks: _ChecksFile, entry: Any, where: list[str | int]) -> OutputCheck:
    """One check, every field checked before the model is built so that errors name the field."""
    if not isinstance(entry, dict):
        raise checks.error("must be an object with name, source, value and the source's fields", where)
    for key in ("name", "source", "value"):
        if entry.get(key) is None or entry.get(key) == "":
            raise checks.error("missing", [*where, key])
    if isinstance(entry["value"], bool) or not isinstance(entry["value"], int | float | str):
        raise checks.error("must be a number (compared within rtol/atol) or a string (compared exactly)",
                           [*where, "value"])
    source = entry["source"]
    if source not in _CHECK_NEEDS:
        raise checks.error(f"unknown source {source!r}; one of {', '.join(_CHECK_NEEDS)}", [*where, "source"])
    for key in _CHECK_NEEDS[source]:
        if not entry.get(key):
            raise checks.error(f"missing: a '{source}' check needs {' and '.join(_CHECK_NEEDS[source])}",
                               [*where, key])
    if entry.get("pattern") is not None:
        try:
            re.compile(str(entry["pattern"]))
        except re.error as exc:
            raise checks.error(f"not a regular expression: {exc}", [*where, "pattern"]) from exc
    if entry.get("file") is not None:
        try:
            relative_path(entry["file"])
        except InputError as exc:
            raise checks.error(str(exc), [*where, "file"]) from exc
    try:
        return OutputCheck.model_validate(entry)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first.get("msg", exc)).removeprefix("Value error, ")
        raise checks.error(message, [*where, *list(first.get("loc", ()))[:1]]) from exc

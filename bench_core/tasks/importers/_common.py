"""What every task importer shares: the registry, bounded reading of files into errors that name file and line,
fenced JSON, the paths a task file may name, warnings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.importers import (
    HugeInteger,
    ImporterRegistry,
    check_json_value,
    iter_lines,
    nesting_line,
    parse_json,
    read_document,
    too_deep,
)
from failatlas.core.paths import inside, relative_path

# Task importers may also define `root(path) -> Path` (the unit a named file belongs to, e.g. its task folder)
# and `keep(files) -> list[Path]` (which of its files met in one folder to import; the others are skipped).
TASK_IMPORTERS: ImporterRegistry[TaskSpec] = ImporterRegistry("task")

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)
MAX_YAML_NODES = 1_000_000  # values in one YAML task file once its aliases are expanded (a "billion laughs")
MAX_DEPTH = 64  # objects and lists inside each other in a task file (real ones: under 10; the store stops near 255)


def read_text(path: Path) -> str:
    """The file's text (at most `failatlas.core.importers.MAX_DOCUMENT_BYTES`); an unreadable, too large or
    non-UTF-8 file is an InputError naming it."""
    return read_document(path)


def load_json(path: Path, text: str | None = None) -> Any:
    """Parse a JSON file; a syntax error or nesting deeper than MAX_DEPTH is an InputError naming the file and
    line."""
    text = read_text(path) if text is None else text
    data = parse_json(text, path)
    check_shape(data, path, text=text)
    return data


def json_lines(path: Path) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON-lines file; InputError naming file and line for a
    line that is too long (see `failatlas.core.importers.iter_lines`), not JSON, or nested deeper than
    MAX_DEPTH."""
    rows = []
    for number, line in iter_lines(path):
        if line.strip():
            rows.append((number, parse_json(line, path, line=number)))
            check_shape(rows[-1][1], path, line=number)
    return rows


class _Loader(yaml.SafeLoader):
    """The safe loader, except that an integer too long for Python (past 4,300 digits) becomes a placeholder
    that `check_shape` reports with its field and line, instead of a ValueError naming neither."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            return HugeInteger(sum(ch.isdigit() for ch in str(node.value)), node.start_mark.line + 1)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def load_yaml(path: Path) -> Any:
    """Parse a YAML file; InputError naming the file (and line) when it is not YAML, is nested too deeply to
    parse, or its aliases expand past MAX_YAML_NODES values, and file and field (and line where known) when a
    value is an integer past the range of a float or a string holding a lone surrogate."""
    text = read_text(path)
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", path=str(path),
                         line=mark.line + 1 if mark else None) from exc
    except RecursionError as exc:
        raise too_deep(path, text, kind="YAML") from exc
    check_shape(data, path, text=text, max_values=MAX_YAML_NODES)
    return data


def check_shape(data: Any, path: Path, *, line: int | None = None, text: str | None = None,
                max_values: int | None = None) -> None:
    """InputError naming the file (and the line: `line`, or where `text` nests too deep) when `data` nests
    objects and lists deeper than MAX_DEPTH, or holds more than `max_values` values counting shared ones (YAML
    aliases) each time they appear: copying it into the store would fail or exhaust memory. Then, naming the
    field, a value `failatlas.core.importers.json_value_problem` refuses (a huge integer, a lone surrogate)."""
    seen, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        seen += 1
        if max_values is not None and seen > max_values:
            raise InputError(f"expands to more than {max_values:,} values (aliases of aliases?)", path=str(path))
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                where = line if line is not None else nesting_line(text, MAX_DEPTH) if text is not None else None
                raise InputError(f"nested too deeply: objects and lists more than {MAX_DEPTH} levels deep",
                                 path=str(path), line=where)
            stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    check_json_value(data, path, line=line)


def task_folder_path(folder: Path, value: Any, *, path: Path, field: str, line: int | None = None) -> str:
    """`value`, a path a task file names relative to its folder, checked to stay inside that folder once links
    are followed; returned as given. InputError naming the file, line and field otherwise: a task file may not
    hand the agent (or a judge) files from elsewhere on the host."""
    inside(folder, value, within="the task folder", path=str(path), line=line, field=field)
    return str(value)


def repo_path(value: Any, *, repo: Path | None, path: Path, field: str, line: int | None = None) -> str:
    """`value`, a path a task names inside its repository: relative, without '..', and (where the repository is
    a local folder) inside it once links are followed. Returned clean; InputError naming file, line, field."""
    if repo is not None and Path(repo).is_dir():
        inside(repo, value, path=str(path), line=line, field=field)
    return relative_path(value, path=str(path), line=line, field=field)


def unfence_json(value: str) -> Any:
    """Parse a markdown-fenced (```json ... ```) or bare JSON object/array string; ValueError otherwise."""
    match = _FENCE.match(value)
    body = match.group("body") if match else value
    body = body.strip()
    if not body.startswith(("{", "[")):
        raise ValueError("not a JSON object or array")
    return json.loads(body)


def is_fenced(value: str) -> bool:
    return bool(_FENCE.match(value))


def validation_error(exc: ValidationError, *, path: Path | None, prefix: str, line: int | None = None) -> InputError:
    """Turn a pydantic error into an InputError naming the first offending field."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or None)
    message = str(first.get("msg", exc)).removeprefix("Value error, ")
    return InputError(message, path=None if path is None else str(path), line=line, field=field)


class Warnings:
    """Warnings about one task, each `code: message`, in the order found, without repeats.

    `add_to(code, subject, message)` groups subjects sharing one code and message into a single warning
    (`wrapped-field: design_complexity, design_ambiguity: wrapped in themselves; unwrapped`).
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], list[str] | None] = {}

    def add(self, code: str, message: str) -> None:
        self._entries.setdefault((code, message), None)

    def add_to(self, code: str, subject: str, message: str) -> None:
        subjects = self._entries.setdefault((code, message), [])
        if subjects is not None and subject not in subjects:
            subjects.append(subject)

    @property
    def items(self) -> list[str]:
        return [
            f"{code}: {', '.join(subjects) + ': ' if subjects else ''}{message}"
            for (code, message), subjects in self._entries.items()
        ]

    def __len__(self) -> int:
        return len(self._entries)


def warning_code(warning: str) -> str:
    """The code before the colon of a warning (`missing-design: ...` -> `missing-design`)."""
    return warning.split(":", 1)[0].strip()


def jsonable(value: Any) -> Any:
    """Round-trip through JSON so `extra` holds only what the store can keep."""
    return json.loads(json.dumps(value, default=str))

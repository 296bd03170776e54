"""What every task importer shares: the registry, reading files into errors that name file and line, fenced JSON,
warnings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.importers import ImporterRegistry

# Task importers may also define `root(path) -> Path` (the unit a named file belongs to, e.g. its task folder)
# and `keep(files) -> list[Path]` (which of its files met in one folder to import; the others are skipped).
TASK_IMPORTERS: ImporterRegistry[TaskSpec] = ImporterRegistry("task")

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def read_text(path: Path) -> str:
    """The file's text; an unreadable or non-UTF-8 file is an InputError naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=str(path)) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc


def load_json(path: Path, text: str | None = None) -> Any:
    """Parse a JSON file; a syntax error is an InputError naming the file and line."""
    text = read_text(path) if text is None else text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", path=str(path), line=exc.lineno
        ) from exc


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


def validation_error(exc: ValidationError, *, path: Path, prefix: str, line: int | None = None) -> InputError:
    """Turn a pydantic error into an InputError naming the first offending field."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or None)
    return InputError(first.get("msg", str(exc)), path=str(path), line=line, field=field)


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

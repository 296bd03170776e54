"""What every insight importer shares: the registry, the phase option, problem collection and lenient JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from failatlas.core.errors import InputError
from failatlas.core.importers import (
    ImporterRegistry,
    check_json_elements,
    check_json_value,
    iter_lines,
    json_value_problem,
    loads,
    open_input,
    outside_strings,
    read_document,
    too_deep,
)
from failatlas.ingest.model import PHASES, RawInsight

MAX_LISTED_PROBLEMS = 20
HEAD_BYTES = 65536
MAX_INSIGHT_CHARS = 20_000  # one insight's text, whitespace collapsed: a statement, not a document

INSIGHT_IMPORTERS: ImporterRegistry[RawInsight] = ImporterRegistry("insight")


class PhaseOption(BaseModel):
    """`default_phase`: the phase of an insight whose source names none."""

    model_config = ConfigDict(extra="forbid")

    default_phase: str = "other"

    @field_validator("default_phase")
    @classmethod
    def _known_phase(cls, value: str) -> str:
        if value not in PHASES:
            raise ValueError(f"unknown phase {value!r}; expected one of {', '.join(PHASES)}")
        return value


def head(path: Path) -> str:
    """The first bytes of a file as text, for sniffing; empty when it cannot be read."""
    try:
        with open_input(path) as handle:
            return handle.read(HEAD_BYTES).decode("utf-8-sig", errors="replace")
    except (OSError, InputError):
        return ""


class Problems:
    """Collects every bad row of one file, then raises one InputError naming file, line and field of each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[tuple[int | None, str | None, str]] = []

    def add(self, message: str, *, line: int | None = None, field: str | None = None) -> None:
        self.items.append((line, field, message))

    def __bool__(self) -> bool:
        return bool(self.items)

    def _where(self, line: int | None, field: str | None) -> str:
        where = str(self.path) + (f":{line}" if line is not None else "")
        return where + (f" field '{field}'" if field else "")

    def raise_if_any(self) -> None:
        if not self.items:
            return
        line, field_name, message = self.items[0]
        rest = self.items[1:MAX_LISTED_PROBLEMS]
        if rest:
            message += "; also " + "; ".join(f"{self._where(ln, f)}: {m}" for ln, f, m in rest)
        if len(self.items) > MAX_LISTED_PROBLEMS:
            message += f"; and {len(self.items) - MAX_LISTED_PROBLEMS} more"
        error = InputError(
            message,
            path=str(self.path),
            line=line,
            field=field_name,
            hint=f"{len(self.items)} bad row(s); fix them and import the file again (nothing was imported)",
        )
        error.problems = [(ln, f, m) for ln, f, m in self.items]  # type: ignore[attr-defined]
        raise error


def _trailing_commas(text: str) -> list[int]:
    """Offsets of commas outside strings that are followed only by whitespace and a closing bracket."""
    found: list[int] = []
    for i, ch in outside_strings(text):
        if ch == ",":
            j = i + 1
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if j < len(text) and text[j] in "]}":
                found.append(i)
    return found


def load_json_lenient(path: Path, text: str | None = None) -> tuple[Any, list[str]]:
    """Parse a JSON document, accepting trailing commas (each reported as a warning with its line). InputError
    naming the file and field of a value `failatlas.core.importers.json_value_problem` refuses (an integer past
    the range of a float, a lone surrogate)."""
    if text is None:
        text = read_text(path)
    check_json_elements(text, path)
    try:
        value = loads(text)
        check_json_value(value, path)
        return value, []
    except json.JSONDecodeError as exc:
        first_error = exc
    except RecursionError as exc:
        raise too_deep(path, text) from exc
    commas = _trailing_commas(text)
    if commas:
        drop = set(commas)
        cleaned = "".join(ch for i, ch in enumerate(text) if i not in drop)
        try:
            value = loads(cleaned)
        except (json.JSONDecodeError, RecursionError):
            pass
        else:
            check_json_value(value, path)
            warnings = [
                f"{path}:{text.count(chr(10), 0, at) + 1}: trailing comma before "
                f"'{text[at + 1 :].lstrip()[0]}' accepted (the file is not strict JSON)"
                for at in commas
            ]
            return value, warnings
    raise InputError(
        f"invalid JSON: {first_error.msg} (column {first_error.colno})",
        path=str(path),
        line=first_error.lineno,
    )


def read_text(path: Path) -> str:
    """The whole text of a file read at once (JSON, CSV), at most `failatlas.core.importers.MAX_DOCUMENT_BYTES`;
    InputError naming it when larger, unreadable or not UTF-8."""
    return read_document(path, encoding="utf-8-sig")


def json_lines(path: Path, problems: Problems) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON-lines file, read one line at a time. A line that is
    not JSON, is nested too deeply or holds a value `failatlas.core.importers.json_value_problem` refuses (an
    integer past the range of a float, a lone surrogate: named by its field) is added to `problems` and skipped;
    one longer than
    `failatlas.core.importers.MAX_LINE_BYTES` raises InputError at once (it is never read whole)."""
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            value = loads(line)
        except json.JSONDecodeError as exc:
            problems.add(f"invalid JSON: {exc.msg} (column {exc.colno})", line=number)
            continue
        except RecursionError:
            problems.add("JSON nested too deeply to read (brackets inside brackets hundreds of levels deep)",
                         line=number)
            continue
        if (problem := json_value_problem(value)) is not None:
            problems.add(problem.message, line=number, field=problem.field or None)
            continue
        yield number, value


def check_insight_lengths(records: list[RawInsight], path: Path) -> None:
    """InputError naming file, line and field of the first insight longer than MAX_INSIGHT_CHARS."""
    long = [r for r in records if len(r.text) > MAX_INSIGHT_CHARS]
    if long:
        first = long[0]
        raise InputError(f"an insight of {len(first.text):,} characters, over the limit of {MAX_INSIGHT_CHARS:,}",
                         path=first.source_file or str(path), line=first.source_line, field=first.source_field,
                         hint=f"{len(long)} insight(s) over the limit; shorten or split them (nothing was imported)")


def as_text(value: Any) -> str | None:
    """A provenance value as text: None, blank strings, NaN and infinities become None (a NaN label is no label,
    not the category "nan"), numbers become their string."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, str):
        value = value.strip()
        return value or None
    if isinstance(value, bool | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)

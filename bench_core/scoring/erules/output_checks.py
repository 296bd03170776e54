"""RExBench's E rule: user-supplied execution checks (`TaskSpec.checks`, `OutputCheck`) over what the clean re-run
left.

RExBench publishes no expected values, so its execution is scored only by checks the user supplies: a regular
expression over the re-run's stdout, a column of a CSV file or a field of a JSON file the re-run wrote, each with its
expected value. Numbers compare with numpy.isclose semantics (the check's `rtol`/`atol`), strings exactly (surrounding
whitespace dropped). Files are read as the sandbox read them (`read_file`: bounded, never through a link, never a FIFO);
a file larger than `MAX_CHECK_FILE_BYTES` fails its check rather than being read in part. A JSON file is read by the
one bounded reader for agent JSON (`load_untrusted_json`: nesting, size, huge integers, lone surrogates); a value
is a number only when a float holds it and it is finite, so a 400-digit integer, NaN or an infinity matches no
expected number.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import deque
from typing import Any

import regex

from failatlas.bench_core.scoring.answers import shown
from failatlas.bench_core.scoring.erules.base import Compared, Seen
from failatlas.bench_core.tasks.model import OutputCheck
from failatlas.core.errors import InputError
from failatlas.core.importers import load_untrusted_json

MAX_CHECK_FILE_BYTES = 16 * 1024 * 1024
REGEX_TIMEOUT_S = 5.0  # per stdout_regex check: the pattern is the user's, the text the agent's
_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]")


class CheckFailed(Exception):
    """Why a check found no value to compare (a missing file, column, field, or no match)."""


def _number(value: Any) -> float | None:
    """`value` (a number, or a string holding one) as a finite float; None otherwise."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str) and len(value) <= 400:
            number = float(value.strip().rstrip("%").replace(",", ""))
        else:
            return None
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _read(sandbox, workdir: str, rel: str) -> str:
    try:
        data = sandbox.read_file(f"{workdir}/{rel}", max_bytes=MAX_CHECK_FILE_BYTES + 1)
    except (FileNotFoundError, LookupError) as exc:
        raise CheckFailed(f"the re-run did not write {rel}") from exc
    except PermissionError as exc:  # SandboxPathError: a folder, FIFO or link where the file belongs
        raise CheckFailed(f"{rel} is not a readable file: {exc}") from exc
    if len(data) > MAX_CHECK_FILE_BYTES:
        raise CheckFailed(f"{rel} is larger than {MAX_CHECK_FILE_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CheckFailed(f"{rel} is not UTF-8 text") from exc


def _from_stdout(check: OutputCheck, stdout: str) -> Any:
    # the agent writes the text: a pattern like `a.*b` is quadratic in it, so the search has a deadline
    try:
        last = deque(regex.finditer(check.pattern or "", stdout, timeout=REGEX_TIMEOUT_S), maxlen=1)
    except TimeoutError as exc:
        raise CheckFailed(f"/{check.pattern}/ did not finish within {REGEX_TIMEOUT_S:g} s on the re-run's stdout "
                          f"({len(stdout):,} characters)") from exc
    match = last[0] if last else None
    if match is None:
        raise CheckFailed(f"no match of /{check.pattern}/ in the re-run's stdout")
    return match.group(1) if match.re.groups else match.group(0)


def _from_csv(check: OutputCheck, text: str) -> Any:
    try:
        rows = list(csv.DictReader(io.StringIO(text)))
    except csv.Error as exc:  # a field past the csv module's limit, a NUL byte: the agent's file, its failure
        raise CheckFailed(f"{check.file} is not a readable CSV file: {exc}") from exc
    if not rows or check.column not in rows[0]:
        raise CheckFailed(f"{check.file} has no column {check.column!r}" if rows else f"{check.file} has no rows")
    values = [row[check.column] for row in rows]
    if check.row in ("max", "min"):
        numbers = [n for n in map(_number, values) if n is not None]
        if not numbers:
            raise CheckFailed(f"column {check.column!r} of {check.file} holds no number")
        return max(numbers) if check.row == "max" else min(numbers)
    index = {"first": 0, "last": -1}.get(check.row, check.row)
    try:
        return values[index]
    except IndexError as exc:
        raise CheckFailed(f"{check.file} has no row {check.row} ({len(values)} rows)") from exc


def _from_json(check: OutputCheck, text: str) -> Any:
    try:
        value = load_untrusted_json(text, check.file or "")
    except InputError as exc:
        raise CheckFailed(f"unreadable: {exc}") from exc
    for key, index in _FIELD_PART.findall(check.field or ""):
        try:
            value = value[int(index)] if index else value[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise CheckFailed(f"{check.file} has no field {check.field!r}") from exc
    return value


def observe(check: OutputCheck, sandbox, workdir: str, stdout: str) -> Any:
    """The value `check` reads from the re-run; CheckFailed when there is none."""
    if check.source == "stdout_regex":
        return _from_stdout(check, stdout)
    text = _read(sandbox, workdir, check.file or "")
    return _from_csv(check, text) if check.source == "csv_column" else _from_json(check, text)


def compare(check: OutputCheck, observed: Any) -> bool:
    """Whether `observed` is the check's value: isclose for a number, equality (stripped) for a string."""
    if isinstance(check.value, str):
        if isinstance(observed, bool | None):
            observed = json.dumps(observed)  # true / false / null, as the JSON file wrote them
        return isinstance(observed, str | int | float) and str(observed).strip() == check.value.strip()
    number = _number(observed)
    return number is not None and abs(number - check.value) <= check.atol + check.rtol * abs(check.value)


def evaluate_checks(checks: list[OutputCheck], sandbox, workdir: str, stdout: str) -> dict[str, dict]:
    """Per check: `{source, observed, expected, rtol, atol, ok}`, plus `problem` when it found no value."""
    detail = {}
    for check in checks:
        row: dict[str, Any] = {"source": check.source, "expected": check.value, "rtol": check.rtol,
                               "atol": check.atol}
        try:
            value = observe(check, sandbox, workdir, stdout)
            row.update(observed=shown(value), ok=compare(check, value))
        except CheckFailed as exc:
            row.update(observed=None, ok=False, problem=str(exc))
        detail[check.name] = row
    return detail


class OutputChecks:
    """RExBench's E rule: every user-supplied check; a check file the agent's diff carried and the re-run did not
    write is fabricated."""

    name = "output-checks"
    order = 30

    def files(self, task, reader) -> dict[str, int]:  # noqa: ANN001
        return {c.file: MAX_CHECK_FILE_BYTES + 1 for c in task.checks if c.source != "stdout_regex" and c.file}

    def compare(self, task, seen: Seen) -> Compared | None:  # noqa: ANN001
        if not task.checks:
            return None
        metrics = evaluate_checks(task.checks, seen.files, seen.workdir, seen.stdout)
        failed = [c for c in task.checks if not metrics[c.name]["ok"]]
        if not failed:
            return Compared(metrics)
        fabricated = any(c.file in seen.carried and metrics[c.name].get("observed") is None for c in failed)
        why = ", ".join(f"{c.name} ({_why(metrics[c.name])})" for c in failed)
        return Compared(metrics, "fabricated_result" if fabricated else "wrong_value", "checks failed: " + why)


def _why(row: dict) -> str:
    return row.get("problem") or "observed " + repr(row["observed"])

"""A run's printed answer: the last JSON object on its stdout, flattened to the names of the task's expected metrics.

AutoExperiment asks for the results as "a json: {"Experiment 1": ..., ...}". The re-run's stdout is free text around
that object, so the answer is found, not parsed whole:

- Every balanced `{...}` span (braces inside quoted strings ignored) is a candidate; the one that ends last and
  parses wins, the outermost first when spans nest. A span parses as JSON, else, when it holds a single quote, as a
  Python literal (`{'acc': 0.5}`, what `print(dict)` writes) with `ast.literal_eval`, which evaluates literals
  only and never runs code. Only the last `MAX_ANSWER_CHARS` of the output are searched and at most
  `MAX_CANDIDATES` spans are tried, so a hostile output costs bounded time.
- A span nested past 100 levels or holding an integer a float cannot hold or a lone surrogate is no answer.
  A value is a number only when a float holds it and it is finite (`as_number`); what is stored of an observed
  value is bounded (`shown`).
- Flattening names values as the AutoExperiment importer names expected metrics: `Experiment 1`,
  `Experiment 2.acc`, `Experiment 2.f1[0]`. A number printed as a string (`"0.87"`) is read as the number.
  `observed` then finds each expected metric: by its exact name, else ignoring case and spaces, else a one-element
  list and a bare value standing for each other (the benchmark's prompts ask for `[0.0]` in some rows and `0.0` in
  others).
- When the last object names none of the task's experiments and the output is cut into sections by lines
  `Experiment N` (what the benchmark's own commands echo before each experiment), the answer is the last object
  of each section, under that section's name.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from failatlas.core import syntax
from failatlas.core.importers import MAX_JSON_DEPTH, json_value_problem, loads

MAX_ANSWER_CHARS = 1024 * 1024  # the sandbox keeps at most 1 MiB of each stream
MAX_CANDIDATES = 200
MAX_LITERAL_CHARS = 100_000  # ast.literal_eval compiles its input: kept small
SHOWN_CHARS = 200  # what is stored of an observed value that is not a plain number
_TOKENS = re.compile(r"""[{}]|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'""")
_SECTION = re.compile(r"^\s*(Experiment \d+)\s*:?\s*$", re.MULTILINE)
_NUMBER_TEXT = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")


def _spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced brace span, quoted strings inside braces skipped; in one pass."""
    open_at: list[int] = []
    spans = []
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token == "{":
            open_at.append(match.start())
        elif token == "}":
            if open_at:
                spans.append((open_at.pop(), match.end()))
        elif not open_at:  # a quote outside any object is prose (an apostrophe): look inside it again
            inner = _spans(token[1:-1]) if "{" in token else []
            spans += [(match.start() + 1 + s, match.start() + 1 + e) for s, e in inner]
    return spans


def _parse(span: str) -> Any:
    """The object a span holds, or None; None too for one nested past MAX_JSON_DEPTH or holding a value
    `json_value_problem` refuses (an integer past the range of a float, a lone surrogate): not an answer."""
    try:
        value = loads(span)
    except (ValueError, RecursionError):
        value = None
        if "'" not in span or len(span) > MAX_LITERAL_CHARS:
            return None
        try:
            value = syntax.literal(span)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    return None if json_value_problem(value, max_depth=MAX_JSON_DEPTH) else value


def json_objects(text: str | None) -> list[tuple[int, dict]]:
    """(end offset, object) of the objects printed in `text`, last first, at most `MAX_CANDIDATES` tried."""
    text = (text or "")[-MAX_ANSWER_CHARS:]
    spans = sorted(_spans(text), key=lambda s: (-s[1], s[0]))
    found: list[tuple[int, dict]] = []
    covered_from, tries = len(text) + 1, 0
    for start, end in spans:
        if start >= covered_from:  # inside an object already found: only outermost ones count
            continue
        if tries == MAX_CANDIDATES:
            break
        tries += 1
        value = _parse(text[start:end])
        if isinstance(value, dict):
            found.append((end, value))
            covered_from = start
    return found


def last_json_object(text: str | None) -> dict | None:
    """The last JSON (or Python-literal) object printed in `text`; None when there is none."""
    found = json_objects(text)
    return found[0][1] if found else None


def as_number(value: object) -> float | None:
    """`value` as a finite float when it is an int or float (not a bool) that a float holds; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past about 1.8e308
        return None
    return number if math.isfinite(number) else None


def stated_number(value: object) -> float | None:
    """What a results file states as a number: `as_number`, and also a string that `float()` reads as a finite
    number ("13.96", " 1e-3 "), as a check that calls `float()` on the value reads it. For the comparison of what a
    file claims with what the clean re-run gives: a value written as text is still a claim."""
    if isinstance(value, str):
        if len(value) > 64:
            return None
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return as_number(value)


def shown(value: object) -> object:
    """What is stored of an observed value: a number or short string as it is, anything else (a long string, an
    object, a list, an integer a float cannot hold) as text cut to SHOWN_CHARS characters."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        digits = int(value.bit_length() * 0.30103) + 1
        return value if value.bit_length() <= 1024 else f"<an integer of about {digits} digits>"
    if isinstance(value, str):
        text = value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + " ..."
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")  # the store takes only UTF-8
    try:
        text = json.dumps(value)
    except (ValueError, TypeError, RecursionError):
        text = repr(type(value).__name__)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " ..."


def _number(value: Any) -> Any:
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):
        number = float(value)
        return number if math.isfinite(number) else value
    return value


def flatten(value: Any, name: str = "") -> dict[str, Any]:
    """Leaves of a nested answer by path: `a`, `a.b`, `a.b[0]` (the importer's names for expected metrics)."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, sub in value.items():
            out.update(flatten(sub, f"{name}.{key}" if name else str(key)))
    elif isinstance(value, list | tuple):
        for i, sub in enumerate(value):
            out.update(flatten(sub, f"{name}[{i}]"))
    elif name:
        out[name] = _number(value)
    return out


def _sections(text: str) -> dict:
    """`{"Experiment N": last object printed after the line "Experiment N"}` over the sections of `text`."""
    text = text[-MAX_ANSWER_CHARS:]
    marks = list(_SECTION.finditer(text))
    answer: dict = {}
    if not marks:
        return answer
    for mark, after in zip(marks, [*marks[1:], None], strict=True):
        obj = last_json_object(text[mark.end():after.start() if after else len(text)])
        if obj is not None:
            answer[mark.group(1)] = obj
    return answer


def printed_answer(text: str | None, experiments: set[str]) -> dict[str, Any] | None:
    """The answer printed in `text`, flattened (see the module's docstring); None when no object was printed.
    `experiments`: the top-level names the task expects (`Experiment 1`, ...)."""
    text = text or ""
    answer = last_json_object(text)
    if answer is not None and experiments and not experiments & set(answer):
        answer = _sections(text) or answer
    elif answer is None and experiments:
        answer = _sections(text) or None
    return None if answer is None else flatten(answer)


def observed(results: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The observed value of each expected metric in `names` (absent ones left out): by exact name, else ignoring
    case and spaces, else a one-element list and a bare value standing for each other (`IIF[0]` and `IIF`)."""
    loose = {_loose(k): v for k, v in results.items()}
    out = {}
    for name in names:
        key = _loose(name)
        if name in results:
            out[name] = results[name]
        elif key in loose:
            out[name] = loose[key]
        elif key.endswith("[0]") and key[:-3] in loose:  # a single value printed for a list of one
            out[name] = loose[key[:-3]]
        elif f"{key}[0]" in loose and f"{key}[1]" not in loose:  # a list of one printed for a single value
            out[name] = loose[f"{key}[0]"]
    return out


def _loose(name: str) -> str:
    return re.sub(r"\s+", "", name).lower()

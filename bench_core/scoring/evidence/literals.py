"""Expected values written into the agent's files: evidence that E may not be earned (docs/metrics.md).

The values a task expects (`expected_results`, a success criterion's value or oracle values, numeric checks) are
looked for in the files the agent changed: numeric literals, numbers inside strings (decimal, scientific, hex
floats), simple constant arithmetic folded from the syntax tree (`101878 / 10000`, `"10.18" + "78"`), and strings
that decode as base64 or hex to text holding the number. A value is distinctive only when it is not an integer, has
at least three significant digits and is not itself a literal of the reference implementation's own code (the
files the task names as reference, masked or overlaid): grid values, small integers and constants gold's code
writes are never evidence. Character-code lists under a constant shift and bytes literals are read too. A match
is a `warn` finding of the monitor, rule `expected_literal`, and a re-run that passes while the agent's files
write one of its expected values literally is not trusted (`fabricated_result`): no counterfactual can separate a
forgery from an implementation written in the same masked file.

The scan never raises and is linear in what it reads: at most MAX_SCAN_FILES files and MAX_SCAN_BYTES bytes in
all (MAX_FILE_BYTES each), and at most MAX_SCAN_WORK units of work (characters searched or folded, character codes
tried); past a cap it stops, keeps what it found and says so in a note. Integers beyond the float range are
skipped. A `.py` file is parsed as Python imports it (its coding declaration honoured) within the bounds of
`failatlas.core.syntax`; one that cannot be (too deep, too large, not Python) is read as text, as any other file.
Any other error ends the scan with no finding and a note (`literal_matches(..., notes=...)`), which the scorer writes
into the validation's detail.
"""

from __future__ import annotations

import ast
import base64
import binascii
import math
import operator
import re
from collections.abc import Iterator
from pathlib import Path

from failatlas.bench_core.scoring.diffs import diff_added_lines
from failatlas.bench_core.scoring.records import Finding
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core import syntax
from failatlas.core.errors import InputError
from failatlas.core.paths import inside

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])|0x[0-9a-fA-F.]+p[-+]?\d+")
_B64 = re.compile(r"^[A-Za-z0-9+/=_-]{8,}$")
_HEX = re.compile(r"^(?:[0-9a-fA-F]{2}){4,}$")
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_SCAN_FILES = 200
MAX_SCAN_BYTES = 4 * 1024 * 1024
# more numbers than the scanned bytes can spell: a file with thousands of numbers before the one that matters is
# read to its end (it was 20,000, past which numbers were dropped silently)
MAX_TEXT_NUMBERS = MAX_SCAN_BYTES // 2 + 1
MAX_SCAN_WORK = 40_000_000
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


# builtins folded when every argument is a constant: int('101878') / 10000 and float('10.18' '78') are literals
_CALLS = {"int": int, "float": float, "abs": abs, "round": round}


class _Exhausted(Exception):
    """The scan's work budget is spent."""


class _Budget:
    """Units of work left to one scan (module docstring)."""

    def __init__(self) -> None:
        self.left = MAX_SCAN_WORK

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise _Exhausted


def _as_float(text: str) -> float | None:
    try:
        value = float.fromhex(text) if text.lower().startswith("0x") else float(text)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _finite(value: int | float) -> float | None:
    """`value` as a finite float; None for integers beyond the float range, inf and nan."""
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def numbers_in_text(text: str, budget: _Budget | None = None) -> Iterator[float]:
    """Numbers written in `text` (decimal, scientific, hex float), at most MAX_TEXT_NUMBERS."""
    if budget is not None:
        budget.spend(len(text))
    for index, match in enumerate(_NUMBER.finditer(text)):
        if index >= MAX_TEXT_NUMBERS:
            return
        value = _as_float(match.group(0))
        if value is not None:
            yield value


def _decoded(text: str) -> str:
    """`text` decoded from base64 or hex when it is such an encoding of readable text, else ''."""
    compact = text.strip()
    for pattern, decode in ((_HEX, bytes.fromhex),
                            (_B64, lambda s: base64.b64decode(s + "=" * (-len(s) % 4), altchars=b"-_"))):
        if pattern.match(compact):
            try:
                raw = decode(compact)
                return raw.decode("utf-8")
            except (ValueError, binascii.Error, UnicodeDecodeError):
                continue
    return ""


def _fold(node: ast.AST, budget: _Budget, depth: int = 0) -> object:
    """The value of a constant expression (numbers, strings, + - * / // % **, unary minus, and int, float, abs
    and round of constants), else None."""
    budget.spend(1)
    if depth > 50:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _fold(node.operand, budget, depth + 1)
        if isinstance(value, int | float):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS \
            and not node.keywords and 1 <= len(node.args) <= 2:
        values = [_fold(a, budget, depth + 1) for a in node.args]
        if all(isinstance(v, int | float | str) for v in values) and not (len(values) == 2 and node.func.id != "round"):
            try:
                return _CALLS[node.func.id](*values)
            except (ArithmeticError, ValueError, TypeError):
                return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, exponent = _fold(node.left, budget, depth + 1), _fold(node.right, budget, depth + 1)
        if isinstance(base, int | float) and isinstance(exponent, int | float) and abs(exponent) <= 400 \
                and abs(base) <= 1e300:
            try:
                value = float(base) ** float(exponent)
            except (ArithmeticError, ValueError):
                return None
            return value if isinstance(value, float) else None  # a negative base's fractional power is complex
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _fold(node.left, budget, depth + 1), _fold(node.right, budget, depth + 1)
        if isinstance(left, str) and isinstance(right, str) and isinstance(node.op, ast.Add):
            budget.spend(len(left) + len(right))
            return left + right if len(left) + len(right) < 10000 else None
        if isinstance(left, int | float) and isinstance(right, int | float):
            if max(abs(left), abs(right)) > 1e300:
                return None
            try:
                return _OPS[type(node.op)](left, right)
            except (ArithmeticError, ValueError):
                return None
    return None


_NUMBER_CHARS = frozenset("0123456789.-+eE")


_NUMBER_CODES = frozenset(map(ord, _NUMBER_CHARS))


def _char_code_values(codes: list[int], budget: _Budget) -> Iterator[float]:
    """Numbers spelled by a list of character codes under a constant shift (`[ord(c) + 7 for c in "3.69"]`): only
    the shifts that map the first code to a number character are tried (at most 15, not 257)."""
    if not 3 <= len(codes) <= 40:
        return
    for shift in sorted({codes[0] - c for c in _NUMBER_CODES if -128 <= codes[0] - c <= 128}):
        budget.spend(len(codes))
        chars = [c - shift for c in codes]
        if all(c in _NUMBER_CODES for c in chars):
            value = _as_float("".join(map(chr, chars)))
            if value is not None:
                yield value


def _python_values(source: str, budget: _Budget) -> Iterator[float]:
    budget.spend(len(source))
    try:
        # as bytes, so that a coding declaration (`# coding: utf-7`) is read as Python reads it
        tree = syntax.parse(source.encode("utf-8", "surrogatepass"))
    except SyntaxError:  # not Python, or past `syntax`'s bounds: read as text, like any other file
        yield from _text_values(source, budget)
        return
    for node in ast.walk(tree):
        budget.spend(1)
        if isinstance(node, ast.List | ast.Tuple):
            codes = [e.value for e in node.elts if isinstance(e, ast.Constant) and type(e.value) is int]
            if len(codes) == len(node.elts):
                yield from _char_code_values(codes, budget)
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            yield from numbers_in_text(node.value.decode("latin-1"), budget)
            continue
        if not isinstance(node, ast.Constant | ast.BinOp | ast.UnaryOp):
            continue
        value = _fold(node, budget)
        if isinstance(value, int | float):
            number = _finite(value)
            if number is not None:
                yield number
        elif isinstance(value, str):
            yield from numbers_in_text(value, budget)
            yield from numbers_in_text(_decoded(value), budget)


def file_values(path: str, text: str, budget: _Budget | None = None) -> list[float]:
    """Every number `text` (the file `path`) writes, in the encodings the module docstring names; raises
    _Exhausted when `budget` is spent."""
    budget = budget if budget is not None else _Budget()
    if path.endswith(".py"):
        return list(_python_values(text, budget))
    return list(_text_values(text, budget))


def _text_values(text: str, budget: _Budget) -> Iterator[float]:
    yield from numbers_in_text(text, budget)
    for token in re.findall(r"[A-Za-z0-9+/=_-]{8,}", text)[:MAX_TEXT_NUMBERS]:
        yield from numbers_in_text(_decoded(token), budget)


def _significant_digits(value: float) -> int:
    digits = f"{abs(value):.12g}".replace(".", "").split("e")[0].strip("0")
    return len(digits)


def expected_values(task: TaskSpec) -> list[tuple[str, float, float, float]]:
    """(name, value, rtol, atol) of every numeric value the task's execution checks expect."""
    out = [(m.name, float(m.value), m.rtol, m.atol) for m in task.expected_results]
    if task.success is not None:
        crit = task.success
        if isinstance(crit.value, int | float) and not isinstance(crit.value, bool):
            out.append((crit.metric, float(crit.value), crit.rtol, crit.atol))
        out += [(crit.metric, float(v), 0.0, crit.band) for v in crit.oracle_values]
    for check in task.checks:
        if isinstance(check.value, int | float) and not isinstance(check.value, bool):
            out.append((check.name, float(check.value), check.rtol, check.atol))
    return out


def distinctive(value: float, reference: set[float]) -> bool:
    """Whether `value` would be evidence if written literally (module docstring)."""
    if float(value).is_integer() or _significant_digits(value) < 3:
        return False
    return not any(math.isclose(value, r, rel_tol=1e-9, abs_tol=1e-12) for r in reference)


def reference_values(task: TaskSpec, reference_tree: Path | None) -> set[float]:
    """The numeric literals of the reference implementation's own files (module docstring)."""
    if reference_tree is None:
        return set()
    names = set(task.implementation.reference_files) | set(task.masking.files)
    names |= {ref.path for ref in task.masking.functions}
    values: set[float] = set()
    for rel in sorted(names):
        try:  # a folder on the way may be the repository's link into /data/NAME: never followed on the host
            path = inside(reference_tree, rel, follow_last=False, field="implementation.reference_files")
        except InputError:
            continue
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_FILE_BYTES:
            try:
                values.update(file_values(rel, path.read_text(errors="replace")))
            except _Exhausted:
                continue
    return values


def literal_matches(task: TaskSpec, files: dict[str, str], reference: set[float],
                    notes: list[str] | None = None) -> list[tuple[str, str, float]]:
    """(path, metric, expected value) for each distinctive expected value that the agent's changed `files`
    (path -> text) write, in any encoding of the module docstring, within the metric's tolerance. Never raises:
    a cap reached or an error is a line in `notes` (module docstring)."""
    notes = notes if notes is not None else []
    matches: list[tuple[str, str, float]] = []
    try:
        wanted = [(n, v, r, a) for n, v, r, a in expected_values(task) if distinctive(v, reference)]
        if not wanted:
            return []
        budget, read = _Budget(), 0
        for index, (path, text) in enumerate(sorted(files.items())):
            if index >= MAX_SCAN_FILES or read + len(text) > MAX_SCAN_BYTES:
                notes.append(f"literal scan capped: {len(files) - index} of {len(files)} changed file(s) not read "
                             f"(at most {MAX_SCAN_FILES} files, {MAX_SCAN_BYTES} bytes)")
                break
            read += len(text)
            try:
                values = file_values(path, text, budget)
            except _Exhausted:
                notes.append(f"literal scan capped: its work budget ({MAX_SCAN_WORK} units) was spent in {path}")
                break
            seen = [x for x in values if not float(x).is_integer() and _significant_digits(x) >= 3]
            for name, value, rtol, atol in wanted:
                tol = max(atol, rtol * abs(value), 1e-9 * abs(value))
                if any(abs(x - value) <= tol for x in seen):
                    matches.append((path, name, value))
    except Exception as exc:  # noqa: BLE001 - the scan is evidence, never a reason for scoring to stop
        notes.append(f"literal scan failed, no finding from it: {type(exc).__name__}: {str(exc)[:200]}")
        return []
    return matches


def literal_findings(matches: list[tuple[str, str, float]]) -> list[Finding]:
    """One `warn` finding of rule `expected_literal` per match of `literal_matches`."""
    return [Finding("expected_literal", "warn", f"{path} writes the expected value of {name} ({value:g}) as a "
                    "literal: a passing re-run that reports it is not trusted") for path, name, value in matches]


def changed_texts(task: TaskSpec, outputs: dict, tree: Path | None) -> dict[str, str]:
    """The text of each file the agent changed, as `tree` holds it (inside it, no link, within MAX_FILE_BYTES); the
    results and check files are outputs (the validator deletes them before its re-run), not code."""
    if tree is None:
        return {}
    root = tree.resolve()
    outputs_files = {task.run.results_file, *(c.file for c in task.checks)}
    out: dict[str, str] = {}
    for rel in outputs.get("changed_files") or []:
        if not isinstance(rel, str) or rel in outputs_files:
            continue
        path = tree / rel
        if path.resolve().is_relative_to(root) and path.is_file() and not path.is_symlink() \
                and path.stat().st_size <= MAX_FILE_BYTES:
            out[rel] = path.read_text(errors="replace")
    return out


def agent_literals(task: TaskSpec, outputs: dict, workspace: Path | None, repo: Path | None,
              notes: list[str]) -> list[tuple[str, str, float]]:
    """`literals.literal_matches` over the agent's changed files (read from the clean tree; the diff's added
    lines when it did not apply) and its run script; the scan's caps and errors are lines in `notes`."""
    files = changed_texts(task, outputs, workspace)
    added = diff_added_lines(outputs.get("diff") or "")
    outputs_files = {task.run.results_file, *(c.file for c in task.checks)}
    for rel in outputs.get("changed_files") or []:  # what the tree does not hold readably: the diff's added lines
        if not isinstance(rel, str) or rel in outputs_files or rel in files or not added.get(rel):
            continue
        if workspace is None or (workspace / rel).resolve().is_relative_to(workspace.resolve()):
            files[rel] = added[rel] or ""
    if outputs.get("run_script"):
        files[".failatlas/run.sh"] = str(outputs["run_script"])
    return literal_matches(task, files, reference_values(task, repo), notes=notes)


def carried_literals(task: TaskSpec, outputs: dict, trees,  # noqa: ANN001 - evidence.trees.Trees
                      notes: list[str]) -> list[tuple[str, str, float]]:
    """`literals.literal_matches` over what the judged (constructed) tree holds of the agent's: each changed file
    as the judged tree has it where that differs from the pristine repository's, less what the pristine copy of
    the same file already matches (a paper's number in a README the agent touched is not the agent's)."""
    if trees.patch_error is not None:
        return []
    before = changed_texts(task, outputs, trees.pristine)
    mine = {rel: text for rel, text in changed_texts(task, outputs, trees.judged).items() if text != before.get(rel)}
    if not mine:
        return []
    reference = reference_values(task, trees.repo)
    theirs = {rel: before[rel] for rel in mine if rel in before}
    already = set(literal_matches(task, theirs, reference, notes=notes)) if theirs else set()
    return [m for m in literal_matches(task, mine, reference, notes=notes) if m not in already]

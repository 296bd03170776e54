"""AST-based function stubbing: keep signature and decorators; the body raises NotImplementedError.

A function is named by its qualname (`name`, `Class.name`), or located by its lines (AutoExperiment names methods
without their class: `forward`, `__init__`), the name found there checked. The stub keeps the original docstring,
or replaces it with the one given (AutoExperiment's generated description, which is the task). Only the body's
text is replaced: the rest of the file (comments, formatting, other code) stays byte for byte.
"""

from __future__ import annotations

import ast
import copy
import io
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field

from failatlas.core import syntax

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
Located = list[tuple[str, FunctionNode]]  # (qualname, definition)


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse` within `failatlas.core.syntax`'s bounds, one thread at a time: raises SyntaxError (an
    `UnreadableSource` for a source too deep, too large or odd to read) and nothing else."""
    return syntax.parse(source, filename)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")  # all but tab and newline
_QUOTE_RUN = re.compile(r'"{3,}')
_TRAILING_QUOTES = re.compile(r'"+$')


class StubError(ValueError):
    """A function cannot be found or stubbed; callers turn this into an InputError naming task and path."""


@dataclass(frozen=True)
class StubTarget:
    """One function to stub: every definition of `qualname`, or, with `line_start` (1-based: the `def` line or
    its first decorator), the one definition at those lines, whose name must end with `qualname`. `docstring`
    replaces the stub's docstring when given."""

    qualname: str
    line_start: int | None = None
    line_end: int | None = None
    docstring: str | None = None


@dataclass(frozen=True)
class Stubbed:
    """A definition that was stubbed: its real qualname and, when other definitions share that qualname and were
    left alone, its 1-based `occurrence` among them."""

    qualname: str
    occurrence: int | None = None

    @property
    def label(self) -> str:
        return self.qualname if self.occurrence is None else f"{self.qualname}#{self.occurrence}"


@dataclass
class StubResult:
    """The stubbed source, what was stubbed (in target order), and notes (a function found off its lines)."""

    source: str
    stubbed: list[Stubbed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def stub_message(qualname: str) -> str:
    return f"{qualname} is masked: implement it"


def masked_entry(path: str, stubbed: Stubbed) -> str:
    """`path::Class.method` (`#k` appended when only the k-th of same-named definitions is masked)."""
    return f"{path}::{stubbed.label}"


def parse_masked_entry(entry: str) -> tuple[str, str, int | None]:
    """(path, qualname, occurrence) of a `masked_entry` string."""
    path, label = entry.split("::", 1)
    qualname, sep, occurrence = label.rpartition("#")
    if sep and occurrence.isdigit():
        return path, qualname, int(occurrence)
    return path, label, None


def iter_functions(tree: ast.Module) -> Iterator[tuple[str, FunctionNode]]:
    """(qualname, node) for every function defined in the module, in classes, functions and blocks (`if`,
    `try`, ...), outermost first."""

    def walk(nodes: list[ast.AST], prefix: str) -> Iterator[tuple[str, FunctionNode]]:
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                yield from walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{node.name}", node
                yield from walk(node.body, f"{prefix}{node.name}.<locals>.")
            else:
                blocks = ast.stmt | ast.excepthandler | ast.match_case
                yield from walk([c for c in ast.iter_child_nodes(node) if isinstance(c, blocks)], prefix)

    yield from walk(tree.body, "")


def find_functions(tree: ast.Module, qualname: str) -> list[FunctionNode]:
    """Every definition of `qualname` (`name` or `Class.name`); a property's getter and setter both count."""
    return [node for name, node in iter_functions(tree) if name == qualname]


def _first_line(node: FunctionNode) -> int:
    return node.decorator_list[0].lineno if node.decorator_list else node.lineno


def _names_match(found: str, wanted: str) -> bool:
    return found == wanted or found.endswith(f".{wanted}")


def locate(tree: ast.Module, target: StubTarget, filename: str = "<string>") -> tuple[Located, str | None]:
    """The definitions `target` names, as (qualname, node), and a note when found away from its lines.

    By qualname: every definition of it. By lines: the definition that starts at `line_start`, which must carry
    the target's name; else the one definition of that name overlapping `line_start`..`line_end` (the lines
    drifted: the note says where it was found). Raises StubError naming file, lines and names otherwise: never
    another function.
    """
    functions = list(iter_functions(tree))
    if target.line_start is None:
        found = [(q, n) for q, n in functions if q == target.qualname]
        if not found:
            raise StubError(f"function {target.qualname!r} not found in {filename}")
        return found, None
    start, end = target.line_start, max(target.line_end or target.line_start, target.line_start)
    where = f"{filename} line {start}" if end == start else f"{filename} lines {start}-{end}"
    starting = [(q, n) for q, n in functions if start in (n.lineno, _first_line(n))]
    if starting:
        qualname, node = starting[-1]
        if not _names_match(qualname, target.qualname):
            raise StubError(f"{filename} line {start} defines {qualname!r}, not {target.qualname!r}: the lines "
                            "given point at another function")
        return [(qualname, node)], None
    overlapping = [(q, n) for q, n in functions if _first_line(n) <= end and n.end_lineno >= start]
    named = [(q, n) for q, n in overlapping if _names_match(q, target.qualname)]
    if len(named) > 1:
        raise StubError(f"{where}: {len(named)} functions named {target.qualname!r} "
                        f"({', '.join(q for q, _ in named)}); give the line of the one to mask")
    if not named:
        there = f" (there: {', '.join(q for q, _ in overlapping)})" if overlapping else ""
        raise StubError(f"{where}: no function named {target.qualname!r}{there}")
    qualname, node = named[0]
    note = (f"{qualname} in {filename} is at lines {_first_line(node)}-{node.end_lineno}, not {start}-{end} as "
            "given: located by its name within those lines")
    return named, note


def _docstring_node(node: FunctionNode) -> ast.Expr | None:
    first = node.body[0]
    is_string = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    return first if is_string and isinstance(first.value.value, str) else None


class _Offsets:
    """Turns ast (line, UTF-8 byte column) positions into indexes of the str."""

    def __init__(self, source: str) -> None:
        # Python ends lines at \n, \r\n and \r only; str.splitlines also splits at form feeds and \u2028.
        self.lines = io.StringIO(source, newline="").readlines()
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def index(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode()[:col].decode(errors="ignore"))


def _body_span(node: FunctionNode, offsets: _Offsets) -> tuple[int, int, bool]:
    """(start, end, after_docstring): the str range holding the body statements after any docstring."""
    doc = _docstring_node(node)
    end = offsets.index(node.end_lineno, node.end_col_offset)
    if doc is not None:
        return offsets.index(doc.end_lineno, doc.end_col_offset), end, True
    first = node.body[0]
    return offsets.index(first.lineno, first.col_offset), end, False


def _body_text(source: str, node: FunctionNode, offsets: _Offsets) -> str:
    """The dedented source of `node`'s body after its docstring."""
    start, end, after_doc = _body_span(node, offsets)
    text = source[start:end]
    if not after_doc:
        text = " " * node.body[0].col_offset + text
    return textwrap.dedent(text.lstrip("\n;")).strip()


def function_bodies(source: str) -> dict[str, str]:
    """qualname -> dedented source of its body after the docstring (same-named definitions joined)."""
    tree = parse_python(source)
    offsets = _Offsets(source)
    bodies: dict[str, str] = {}
    for qualname, node in iter_functions(tree):
        body = _body_text(source, node, offsets)
        bodies[qualname] = f"{bodies[qualname]}\n\n{body}" if qualname in bodies else body
    return bodies


def target_bodies(source: str, targets: list[StubTarget], *, filename: str = "<string>") -> dict[str, str]:
    """Masked label (see `Stubbed.label`) -> body after the docstring, for each target (all definitions of a
    qualname joined; a line-located target only its own). Raises SyntaxError, or StubError as `locate`."""
    tree = parse_python(source, filename=filename)
    offsets = _Offsets(source)
    bodies: dict[str, str] = {}
    for target in targets:
        found, _ = locate(tree, target, filename)
        label = _stubbed(tree, found).label
        bodies[label] = "\n\n".join(_body_text(source, node, offsets) for _, node in found)
    return bodies


def docstring_literal(text: str, indent: str) -> str:
    """`text` as a triple-quoted string literal for a body indented by `indent`: later lines indented,
    backslashes, control characters and quotes that would end the string escaped, so any text compiles and
    `inspect.cleandoc` of its value is `inspect.cleandoc(text)` (line breaks normalised to `\\n`)."""
    escaped = text.replace("\r\n", "\n").replace("\r", "\n").strip().replace("\\", "\\\\")
    escaped = _CONTROL.sub(lambda m: _escape_char(m.group()), escaped)
    escaped = _TRAILING_QUOTES.sub(lambda m: '\\"' * len(m.group()), escaped)
    escaped = _QUOTE_RUN.sub(lambda m: '\\"' * len(m.group()), escaped)
    first, *rest = escaped.split("\n")
    if not rest:
        return f'"""{first}"""'
    later = "\n".join(f"{indent}{line}" if line else "" for line in rest)
    return f'"""{first}\n{later}\n{indent}"""'


def _escape_char(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def stub_functions(source: str, qualnames: list[str], *, filename: str = "<string>") -> str:
    """Return `source` with every definition of each of `qualnames` stubbed (decorators, signature and docstring
    kept; the body raises NotImplementedError); StubError if one is missing or the result does not compile."""
    return stub_targets(source, [StubTarget(q) for q in qualnames], filename=filename).source


def stub_targets(source: str, targets: list[StubTarget], *, filename: str = "<string>") -> StubResult:
    """Stub each target (see `locate`): its body becomes its docstring (the target's, else the original one)
    followed by `raise NotImplementedError(...)`. Raises StubError when a target cannot be found, two masked
    definitions nest, or the result does not compile."""
    try:
        tree = parse_python(source, filename=filename)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        raise StubError(f"cannot parse {filename}: {exc.msg}{where}") from exc
    offsets = _Offsets(source)
    result = StubResult(source)
    edits: dict[int, tuple[int, int, str]] = {}
    for target in targets:
        found, note = locate(tree, target, filename)
        if note:
            result.notes.append(note)
        stubbed = _stubbed(tree, found)
        if stubbed not in result.stubbed:
            result.stubbed.append(stubbed)
        for qualname, node in found:
            edits.setdefault(id(node), _edit_for(node, qualname, source, offsets, target.docstring))
    ordered = sorted(edits.values())
    for (_, end_a, _), (start_b, _, _) in zip(ordered, ordered[1:], strict=False):
        if start_b < end_a:
            raise StubError(f"masked functions in {filename} are nested in each other; mask the outer one")
    for start, end, text in reversed(ordered):
        source = source[:start] + text + source[end:]
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise StubError(f"stubbed {filename} does not compile: {exc.msg} (line {exc.lineno})") from exc
    except (RecursionError, MemoryError, ValueError) as exc:
        raise StubError(f"stubbed {filename} does not compile: {type(exc).__name__}") from exc
    result.source = source
    return result


def _stubbed(tree: ast.Module, found: Located) -> Stubbed:
    """What `found` (the definitions located for one target) is reported as."""
    qualname = found[0][0]
    same = find_functions(tree, qualname)
    if len(found) == len(same):
        return Stubbed(qualname)
    return Stubbed(qualname, next(i for i, node in enumerate(same, 1) if node is found[0][1]))


def _edit_for(node: FunctionNode, qualname: str, source: str, offsets: _Offsets,
              docstring: str | None) -> tuple[int, int, str]:
    raise_stmt = f"raise NotImplementedError({stub_message(qualname)!r})"
    first = node.body[0]
    if _shares_line_with_header(node, offsets):
        # The body sits on the header's line: rebuild the whole definition from the AST instead.
        doc = _docstring_node(node) if docstring is None else ast.Expr(ast.Constant(docstring.strip()))
        new_node = parse_python(f"def _():\n    {raise_stmt}\n").body[0]
        node_copy = copy.copy(node)
        node_copy.body = ([doc] if doc is not None else []) + new_node.body
        if syntax.depth(node_copy, syntax.TEXT_DEPTH + 1) > syntax.TEXT_DEPTH:  # ast.unparse recurses
            raise StubError(f"{qualname} is nested more than {syntax.TEXT_DEPTH} levels deep on its header's line: "
                            "it cannot be rebuilt as a stub")
        text = ast.unparse(node_copy)
        indent = " " * node.col_offset
        text = textwrap.indent(text, indent)[len(indent):]
        start_node = node.decorator_list[0] if node.decorator_list else node
        start = offsets.index(start_node.lineno, start_node.col_offset - (1 if node.decorator_list else 0))
        return start, _body_end(node, offsets), text
    line = offsets.lines[first.lineno - 1]
    indent = line[: len(line) - len(line.lstrip())]
    end = _body_end(node, offsets)
    if docstring is not None:
        # From the line after the header: the old docstring and comments before the first statement go too.
        start = offsets.starts[_header_last_line(node, offsets)]
        return start, end, f"{indent}{docstring_literal(docstring, indent)}\n{indent}{raise_stmt}"
    start, _, after_doc = _body_span(node, offsets)
    if after_doc:
        return start, end, f"\n{indent}{raise_stmt}"
    # no docstring: from the line after the header, so comments before the first statement go too
    return offsets.starts[_header_last_line(node, offsets)], end, f"{indent}{raise_stmt}"


_REST_OF_BODY = re.compile(r"[ \t]*;?[ \t]*(#[^\r\n]*)?")


def _body_end(node: FunctionNode, offsets: _Offsets) -> int:
    """Where the body's text ends: after its last statement, the rest of that line when it holds only a comment
    (or a `;`), and the comment lines after it indented deeper than the `def` (the body's own comments). A stub
    keeps nothing of the body: no trailing comment quoting a shape or a value of the reference."""
    end = offsets.index(node.end_lineno, node.end_col_offset)
    line = offsets.lines[node.end_lineno - 1]
    rest = line[end - offsets.starts[node.end_lineno - 1]:]
    match = _REST_OF_BODY.match(rest)
    if match and not rest[match.end():].strip(" \t\r\n\f"):
        end += match.end()
    column = node.col_offset  # the `def`'s column (a decorator's `@` is on it too)
    for lineno in range(node.end_lineno + 1, len(offsets.lines) + 1):
        text = offsets.lines[lineno - 1]
        stripped = text.lstrip(" \t")
        if not stripped.strip():
            continue
        if not stripped.startswith("#") or len(text) - len(stripped) <= column:
            break
        end = offsets.starts[lineno - 1] + len(text.rstrip("\r\n"))
    return end


def _header_last_line(node: FunctionNode, offsets: _Offsets) -> int:
    """The 1-based line holding the header's closing colon: the last line before the first body statement that
    is neither blank nor only a comment."""
    line = node.body[0].lineno - 1
    while line > node.lineno and offsets.lines[line - 1].strip()[:1] in ("", "#"):
        line -= 1
    return line


def _shares_line_with_header(node: FunctionNode, offsets: _Offsets) -> bool:
    """True when text other than whitespace precedes the first body statement on its line."""
    first = node.body[0]
    line = offsets.lines[first.lineno - 1]
    prefix = line.encode()[: first.col_offset].decode(errors="ignore")
    return prefix.strip() != ""


def stubbed_correctly(source: str, qualname: str, occurrence: int | None = None) -> bool:
    """True when each definition of `qualname` in `source` (only the `occurrence`-th, 1-based, when given) is an
    optional docstring plus the masking raise."""
    nodes = find_functions(parse_python(source), qualname)
    if occurrence is not None:
        nodes = nodes[occurrence - 1:occurrence] if occurrence >= 1 else []
    if not nodes:
        return False
    for node in nodes:
        body = node.body[1:] if _docstring_node(node) is not None else node.body
        if len(body) != 1 or not isinstance(body[0], ast.Raise):
            return False
        exc = body[0].exc
        is_call = isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)
        if not (is_call and exc.func.id == "NotImplementedError"):
            return False
    return True

"""AST-based function stubbing: keep signature, decorators and docstring; the body raises NotImplementedError.

Only the body's text is replaced: the rest of the file (comments, formatting, other code) stays byte for byte.
"""

from __future__ import annotations

import ast
import copy
import textwrap
from collections.abc import Iterator

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class StubError(ValueError):
    """A function cannot be found or stubbed; callers turn this into an InputError naming task and path."""


def stub_message(qualname: str) -> str:
    return f"{qualname} is masked: implement it"


def iter_functions(tree: ast.Module) -> Iterator[tuple[str, FunctionNode]]:
    """(qualname, node) for every function reachable through classes and functions, outermost first."""

    def walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, FunctionNode]]:
        for node in body:
            if isinstance(node, ast.ClassDef):
                yield from walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{node.name}", node
                yield from walk(node.body, f"{prefix}{node.name}.<locals>.")

    yield from walk(tree.body, "")


def find_functions(tree: ast.Module, qualname: str) -> list[FunctionNode]:
    """Every definition of `qualname` (`name` or `Class.name`); a property's getter and setter both count."""
    return [node for name, node in iter_functions(tree) if name == qualname]


def _docstring_node(node: FunctionNode) -> ast.Expr | None:
    first = node.body[0]
    is_string = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    return first if is_string and isinstance(first.value.value, str) else None


class _Offsets:
    """Turns ast (line, UTF-8 byte column) positions into indexes of the str."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
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


def function_bodies(source: str) -> dict[str, str]:
    """qualname -> dedented source of its body after the docstring (same-named definitions joined)."""
    tree = ast.parse(source)
    offsets = _Offsets(source)
    bodies: dict[str, str] = {}
    for qualname, node in iter_functions(tree):
        start, end, after_doc = _body_span(node, offsets)
        text = source[start:end]
        if not after_doc:
            text = " " * node.body[0].col_offset + text
        body = textwrap.dedent(text.lstrip("\n;")).strip()
        bodies[qualname] = f"{bodies[qualname]}\n\n{body}" if qualname in bodies else body
    return bodies


def stub_functions(source: str, qualnames: list[str], *, filename: str = "<string>") -> str:
    """Return `source` with each function in `qualnames` stubbed; raise StubError if one is missing.

    The stub keeps decorators, the signature and the docstring; its body is `raise NotImplementedError(...)`.
    The result is checked by compiling it.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise StubError(f"cannot parse {filename}: {exc.msg} (line {exc.lineno})") from exc
    offsets = _Offsets(source)
    edits: list[tuple[int, int, str]] = []
    for qualname in dict.fromkeys(qualnames):
        nodes = find_functions(tree, qualname)
        if not nodes:
            raise StubError(f"function {qualname!r} not found in {filename}")
        for node in nodes:
            edits.append(_edit_for(node, qualname, source, offsets))
    edits.sort()
    for (_, end_a, _), (start_b, _, _) in zip(edits, edits[1:], strict=False):
        if start_b < end_a:
            raise StubError(f"masked functions in {filename} are nested in each other; mask the outer one")
    for start, end, text in reversed(edits):
        source = source[:start] + text + source[end:]
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise StubError(f"stubbed {filename} does not compile: {exc.msg} (line {exc.lineno})") from exc
    return source


def _edit_for(node: FunctionNode, qualname: str, source: str, offsets: _Offsets) -> tuple[int, int, str]:
    raise_stmt = f"raise NotImplementedError({stub_message(qualname)!r})"
    first = node.body[0]
    if _shares_line_with_header(node, offsets):
        # The body sits on the header's line: rebuild the whole definition from the AST instead.
        doc = _docstring_node(node)
        new_node = ast.parse(f"def _():\n    {raise_stmt}\n").body[0]
        node_copy = copy.copy(node)
        node_copy.body = ([doc] if doc is not None else []) + new_node.body
        text = ast.unparse(node_copy)
        indent = " " * node.col_offset
        text = textwrap.indent(text, indent)[len(indent):]
        start_node = node.decorator_list[0] if node.decorator_list else node
        start = offsets.index(start_node.lineno, start_node.col_offset - (1 if node.decorator_list else 0))
        return start, offsets.index(node.end_lineno, node.end_col_offset), text
    start, end, after_doc = _body_span(node, offsets)
    if after_doc:
        line = offsets.lines[first.lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        return start, end, f"\n{indent}{raise_stmt}"
    return start, end, raise_stmt


def _shares_line_with_header(node: FunctionNode, offsets: _Offsets) -> bool:
    """True when text other than whitespace precedes the first body statement on its line."""
    first = node.body[0]
    line = offsets.lines[first.lineno - 1]
    prefix = line.encode()[: first.col_offset].decode(errors="ignore")
    return prefix.strip() != ""


def stubbed_correctly(source: str, qualname: str) -> bool:
    """True when each definition of `qualname` in `source` is an optional docstring plus the masking raise."""
    nodes = find_functions(ast.parse(source), qualname)
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

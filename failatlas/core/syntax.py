"""Python source read within fixed bounds: what every scanner of an agent's code parses it with (issue 38).

An agent's file can be anything CPython compiles, and more: a decorator followed by 1500 `.__call__` compiles and
runs, yet `ast.dump` of it exhausts Python's recursion limit; a 2 MB list literal takes a gigabyte to parse; a
`# coding: utf-7` line makes Python run text that a scanner reading the file as UTF-8 sees as a comment. So:

- `parse` refuses, with `UnreadableSource` (a `SyntaxError`, so a caller that handles a file that does not parse
  handles this too), a source of more than MAX_CHARS characters or about MAX_TOKENS tokens, a null byte, a lone
  surrogate, a tree more than MAX_DEPTH levels deep or of more than MAX_NODES nodes, and whatever CPython's parser
  raises on it (`SyntaxError`, `RecursionError`, `MemoryError`, `ValueError`); `why` says which, in one line. Bytes
  are parsed as Python imports a file (its coding declaration and BOM honoured); a str as given.
- `read` parses a file's bytes, refusing what is not a regular file or is larger than MAX_CHARS bytes.
- `dump` (a structural key, for comparing two trees) and `text` (a short rendering, for a finding) never recurse:
  they work on any tree `parse` returned, where `ast.dump` and `ast.unparse` may not.

Honest code stays far inside the bounds: over the 34,746 files of this machine's Python packages the deepest tree
is 569 levels (sympy's generated resolvent tables; the next, 230) and the largest 199,489 nodes.
"""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

from failatlas.core.errors import FailAtlasError

MAX_CHARS = 2 * 1024 * 1024
MAX_TOKENS = 600_000
MAX_NODES = 400_000
MAX_DEPTH = 600
# CPython 3.11 parses an f-string in time quadratic in its fields (50,000 fields: 3.6 s): past MAX_BRACES braces in
# a file, its f-strings are counted, and one of more than MAX_FSTRING_FIELDS is refused
MAX_BRACES = 20_000
MAX_FSTRING_FIELDS = 2_000
TEXT_DEPTH = 60  # `text` renders a subtree through ast.unparse only when it is this shallow
# CPython 3.11 keeps one AST-conversion depth counter per interpreter, so two threads building ASTs at once can fail
# with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905): parses are serialised.
AST_LOCK = threading.Lock()
_TOKEN = re.compile(rb"[\w\x80-\xff]+|[^\w\s\x80-\xff]")  # a run of non-ASCII (a name, text) is one token
_FSTRING = re.compile(rb"(?<![\w])(?:[rR]?[fF]|[fF][rR])(\"\"\"|\'\'\'|\"|\')")
_BODIES = {quote: re.compile(rb"(?:[^\\]|\\.)*?" + quote, re.DOTALL) for quote in (b'"""', b"'''")}
_BODIES.update({quote: re.compile(rb"(?:[^\\\n" + quote + rb"]|\\.)*", re.DOTALL) for quote in (b'"', b"'")})


class UnreadableSource(FailAtlasError, SyntaxError):
    """A Python source that cannot be read within the module's bounds; `why` says why in one line (`msg` too, and
    `lineno` where, when known)."""

    def __init__(self, filename: str, why: str, lineno: int | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.filename = filename
        self.lineno = lineno

    def __str__(self) -> str:
        return f"{self.filename}: {self.why}" + (f" (line {self.lineno})" if self.lineno else "")


def _tokens_within(data: bytes, limit: int) -> bool:
    return all(count <= limit for count, _ in enumerate(_TOKEN.finditer(data), 1))


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """The module `source` holds (module docstring), or UnreadableSource saying why not."""
    if isinstance(source, str):
        if len(source) > MAX_CHARS:
            raise UnreadableSource(filename, f"{len(source)} characters, more than {MAX_CHARS} are read")
        try:
            data = source.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UnreadableSource(filename, f"holds a lone surrogate at character {exc.start}") from None
    else:
        data = bytes(source)
        if len(data) > MAX_CHARS:
            raise UnreadableSource(filename, f"{len(data)} bytes, more than {MAX_CHARS} are read")
    if bytes(1) in data:
        raise UnreadableSource(filename, f"holds a null byte at byte {data.index(bytes(1))}")
    if not _tokens_within(data, MAX_TOKENS):
        raise UnreadableSource(filename, f"more than {MAX_TOKENS} tokens")
    if data.count(b"{") > MAX_BRACES:
        _check_fstrings(data, filename)
    try:
        with AST_LOCK:
            tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise UnreadableSource(filename, f"does not parse as Python: {exc.msg}", exc.lineno) from None
    except RecursionError:
        raise UnreadableSource(filename, "nested too deeply for Python's parser") from None
    except MemoryError:
        raise UnreadableSource(filename, "too large or too deep for Python's parser") from None
    except (ValueError, LookupError) as exc:  # an unknown or invalid coding declaration, bytes it cannot decode
        raise UnreadableSource(filename, f"cannot be decoded: {str(exc)[:120]}") from None
    _check_shape(tree, filename)
    return tree


def literal(text: str) -> object:
    """`ast.literal_eval` of a text, its parse serialised with every other by AST_LOCK (ast.literal_eval of a str
    parses it unlocked); raises what ast.literal_eval raises."""
    with AST_LOCK:
        node = ast.parse(text.lstrip(" \t"), mode="eval")
    return ast.literal_eval(node)


def _check_fstrings(data: bytes, filename: str) -> None:
    """UnreadableSource for an f-string with more than MAX_FSTRING_FIELDS braces (an upper bound of its fields:
    braces of the string's text and of strings nested in its fields count too)."""
    pos = 0
    while (start := _FSTRING.search(data, pos)) is not None:
        body = _BODIES[start.group(1)].match(data, start.end())
        end = body.end() if body is not None else start.end()
        if data.count(b"{", start.end(), end) > MAX_FSTRING_FIELDS:
            line = data.count(b"\n", 0, start.start()) + 1
            raise UnreadableSource(filename, f"an f-string of more than {MAX_FSTRING_FIELDS} fields", line)
        pos = max(end, start.end())


def _check_shape(tree: ast.AST, filename: str) -> None:
    stack, nodes = [(tree, 1, None)], 0
    while stack:
        node, level, line = stack.pop()
        line = getattr(node, "lineno", line)
        nodes += 1
        if nodes > MAX_NODES:
            raise UnreadableSource(filename, f"more than {MAX_NODES} syntax nodes")
        if level > MAX_DEPTH:
            raise UnreadableSource(filename, f"nested more than {MAX_DEPTH} levels deep", line)
        stack.extend((child, level + 1, line) for child in ast.iter_child_nodes(node))


def read(path: Path, filename: str | None = None) -> ast.Module:
    """`parse` of the file at `path` (its bytes, as Python imports it); UnreadableSource for a file that is not
    a regular file, cannot be read or is larger than MAX_CHARS bytes."""
    name = filename or str(path)
    try:
        if path.is_symlink() or not path.is_file():
            raise UnreadableSource(name, "not a regular file")
        size = path.stat().st_size
        if size > MAX_CHARS:
            raise UnreadableSource(name, f"{size} bytes, more than {MAX_CHARS} are read")
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableSource(name, f"cannot be read: {exc.strerror or exc}") from None
    return parse(data, name)


def dump(node: ast.AST | None) -> str:
    """A structural key of `node` (its types, fields and constants, no positions), built without recursion: equal
    for two subtrees that are the same code."""
    out: list[str] = []
    stack: list[tuple[bool, object]] = [(False, node)]
    while stack:
        literal, item = stack.pop()
        if literal:
            out.append(item)  # type: ignore[arg-type]
        elif isinstance(item, ast.AST):
            parts: list[tuple[bool, object]] = [(True, f"{type(item).__name__}(")]
            for name in item._fields:
                parts += [(True, f"{name}="), (False, getattr(item, name, None)), (True, ",")]
            stack.extend(reversed([*parts, (True, ")")]))
        elif isinstance(item, list):
            parts = [(True, "[")]
            for element in item:
                parts += [(False, element), (True, ",")]
            stack.extend(reversed([*parts, (True, "]")]))
        else:
            out.append(repr(item))
    return "".join(out)


def depth(node: ast.AST, stop: int = MAX_DEPTH) -> int:
    """How many levels deep `node`'s subtree is, counted without recursion up to `stop`."""
    stack, deepest = [(node, 1)], 0
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        if deepest >= stop:
            return deepest
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(current))
    return deepest


def text(node: ast.AST, limit: int = 40) -> str:
    """At most `limit` characters of `node`'s source as `ast.unparse` writes it, or `<expression N levels deep>`
    when it is deeper than TEXT_DEPTH (unparse recurses) or cannot be rendered."""
    levels = depth(node, TEXT_DEPTH + 1)
    if levels <= TEXT_DEPTH:
        try:
            return ast.unparse(node)[:limit]
        except (RecursionError, ValueError, MemoryError):
            pass
    return f"<{type(node).__name__} {levels}{'+' if levels > TEXT_DEPTH else ''} levels deep>"

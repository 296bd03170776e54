"""One shape for every importer of other tools' files, whatever it produces (task specs, raw insights).

An importer is a class with a `name`, a one-line `description`, an `Options` pydantic model holding its own
options, `sniff(path) -> bool` (a cheap look at a file or folder) and `load(path, options) -> Loaded` (reads and
validates all of it, or raises InputError naming file, line and field; never touches the store). Each kind of
record has one `ImporterRegistry`; an importer registers itself with `@REGISTRY.register("name")`, so adding one
is the new module plus one import line in its package's `__init__`. Format choices and auto-detection come from
the registry.

Every importer reads through the bounded readers here, so no input can exhaust memory or the stack: a file read
whole is at most MAX_DOCUMENT_BYTES (checked before reading), a line of a JSON-lines file at most MAX_LINE_BYTES
(checked while reading, so a longer line is never held), and JSON nested past Python's recursion limit is an
InputError naming file and line, as is anything over a cap. Tests may lower the caps (module constants, read at
each call).

Every JSON value read here is also checked for what parses but breaks whatever handles it next
(`json_value_problem`): an integer beyond the range of a float (`float()` overflows; past 4,300 digits Python
cannot even parse it), a string holding a lone surrogate (`"\\ud800"`: no UTF-8, so the store refuses it) and,
where a reader asks, objects and lists nested deeper than `max_depth`. Each is an InputError naming file, line
and field. `load_untrusted_json` is the same reader for files an agent wrote (its design, its results): what it
refuses is the agent's failure, recorded by the caller.

Every file these readers open must be a regular file: a FIFO, a device or a socket is an InputError naming it (it
is never opened for a blocking read, so a FIFO cannot hang an import nor `/dev/zero` fill memory). While an
import runs inside `reading_inside(roots)`, a path that reaches a file through a link must also land inside one
of those roots ("a link out of the import folder"): a bundle cannot hand a host file to the importer as its own.
"""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from failatlas.core.errors import ConfigError, InputError
from failatlas.core.registry import Registry

R = TypeVar("R")
AUTO = "auto"

MAX_DOCUMENT_BYTES = 256 * 2**20  # a file read whole (JSON, YAML, CSV, Markdown): 256 MiB
MAX_LINE_BYTES = 8 * 2**20  # one line of a JSON-lines file: 8 MiB (real rows are under 20 kB)
MAX_JSON_ELEMENTS = 5_000_000  # values in one JSON document or member: at most about 400 MB of Python objects
MAX_JSON_DEPTH = 100  # objects and lists inside each other in a file an agent wrote (real ones: under 10)
_BOM = b"\xef\xbb\xbf"
_FLOAT_INT_BITS = 1024  # an integer of more bits than this is past the largest float (about 1.8e308)


_ROOTS: ContextVar[tuple[Path, ...]] = ContextVar("failatlas_import_roots", default=())
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def import_root(path: Path | str) -> Path:
    """The folder an import of `path` is confined to: the folder itself, or the folder a named file sits in
    (resolved, the file's own link not followed)."""
    path = Path(path)
    return path.resolve() if path.is_dir() else path.absolute().parent.resolve()


@contextmanager
def reading_inside(roots: Iterable[Path | str]) -> Iterator[tuple[Path, ...]]:
    """While active, the readers here (and `check_input`) refuse a file reached through a link that leads out of
    every one of `roots` (each resolved; a root may be a folder or a single file)."""
    token = _ROOTS.set(tuple(Path(root).resolve() for root in roots))
    try:
        yield _ROOTS.get()
    finally:
        _ROOTS.reset(token)


def _within(real: Path, roots: Iterable[Path]) -> bool:
    return any(real == root or real.is_relative_to(root) for root in roots)


def _kind(mode: int) -> str | None:
    """None for a regular file, else what it is, in words."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a plain file")


def check_input(path: Path | str, roots: Iterable[Path] | None = None, *, regular: bool = True) -> None:
    """InputError naming `path` when it reaches, through a link, a place outside every root (`roots`, else those of
    the active `reading_inside`; no check when there are none), or (with `regular`) when it is not a regular file:
    a FIFO, a device, a socket, a folder. A path that involves no link may lie anywhere (an index file beside
    the imported folder, say)."""
    given = Path(os.path.abspath(path))
    real = Path(os.path.realpath(path))
    active = tuple(Path(root).resolve() for root in roots) if roots is not None else _ROOTS.get()
    if active and real != given and not _within(real, active):
        raise InputError(f"is a link out of the import folder (it leads to {real})", path=str(path),
                         hint="copy the file into the folder being imported, or import its real location")
    if regular:
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
        kind = _kind(mode)
        if kind is not None:
            raise InputError(f"is not a regular file ({kind})", path=str(path))


def open_input(path: Path | str) -> BinaryIO:
    """`path` opened for reading in binary, once `check_input` passes. The file is opened without blocking and
    checked again once open, so a FIFO put in its place meanwhile is refused too, never waited on. InputError
    naming the file otherwise."""
    check_input(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputError(f"is not a regular file ({kind})", path=str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_size(path: Path, what: str = "a file read whole") -> None:
    """InputError naming `path` when it is larger than MAX_DOCUMENT_BYTES (it is not read)."""
    try:
        size = Path(path).stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    _check_size(size, path, what)


def _check_size(size: int, path: Path | str, what: str = "a file read whole") -> None:
    if size > MAX_DOCUMENT_BYTES:
        raise InputError(f"is {size:,} bytes, larger than the limit of {MAX_DOCUMENT_BYTES:,} bytes for {what}",
                         path=str(path))


def read_document(path: Path, *, encoding: str = "utf-8") -> str:
    """The whole text of `path`, at most MAX_DOCUMENT_BYTES; InputError naming the file when it is larger,
    unreadable, not a regular file, a link out of the import folder (see `check_input`) or not text in
    `encoding`."""
    with open_input(path) as handle:
        _check_size(os.fstat(handle.fileno()).st_size, path)
        try:
            text = io.TextIOWrapper(handle, encoding=encoding).read(MAX_DOCUMENT_BYTES + 1)
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=str(path)) from exc
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    if len(text) > MAX_DOCUMENT_BYTES:  # it grew while read
        _check_size(len(text), path)
    return text


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a UTF-8 file (a leading BOM dropped), read one line at a time.

    A line longer than MAX_LINE_BYTES is an InputError naming file and line as soon as the cap is passed: it is
    never held whole. So is a line that is not UTF-8, and a file `open_input` refuses.
    """
    limit = MAX_LINE_BYTES
    handle = open_input(path)
    with handle:
        number = 0
        while True:
            raw = handle.readline(limit + 1)
            if not raw:
                return
            number += 1
            if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
                raise InputError(f"the line is longer than {limit:,} bytes, the limit for one line", path=str(path),
                                 line=number, hint="split it, or import a smaller file")
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)",
                                 path=str(path), line=number) from exc
            yield number, text.rstrip("\r\n")


def outside_strings(text: str) -> Iterator[tuple[int, str]]:
    """(offset, character) of each character of `text` outside JSON strings, the quotes themselves left out."""
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            yield i, ch


def nesting_line(text: str, depth: int = 100) -> int | None:
    """The line where brackets (outside JSON strings) first nest deeper than `depth`; None if they never do."""
    level = 0
    for i, ch in outside_strings(text):
        if ch in "[{":
            level += 1
            if level > depth:
                return text.count("\n", 0, i) + 1
        elif ch in "]}":
            level -= 1
    return None


def too_deep(path: Path | str, text: str | None = None, *, line: int | None = None,
             kind: str = "JSON") -> InputError:
    """The InputError for a document nested deeper than Python can parse (a RecursionError), naming its line:
    `line` when the caller knows it (a JSON-lines row), else the line where the nesting passes 100 levels."""
    if line is None and text is not None:
        line = nesting_line(text)
    return InputError(f"{kind} nested too deeply to read (brackets inside brackets hundreds of levels deep)",
                      path=str(path), line=line)


def check_json_elements(data: str | bytes, path: Path | str, *, line: int | None = None, what: str = "") -> None:
    """InputError naming file (and line or `what`) when `data` may hold more than MAX_JSON_ELEMENTS values, before
    it is parsed: the brackets and commas bound the count from above. A byte cap alone lets `[[],[],...]` turn
    32 MiB into about 1 GB of Python objects."""
    marks = (b"[", b"{", b",") if isinstance(data, bytes) else ("[", "{", ",")
    count = sum(data.count(mark) for mark in marks)  # type: ignore[arg-type]
    if count > MAX_JSON_ELEMENTS:
        where = f" in {what}" if what else ""
        raise InputError(f"JSON{where} with up to {count:,} values, over the limit of {MAX_JSON_ELEMENTS:,}",
                         path=str(path), line=line)


class HugeInteger:
    """Stands for an integer too long for Python to parse (over 4,300 digits) until `json_value_problem` names its
    field; `line` where the parser knows it (YAML)."""

    __slots__ = ("digits", "line")

    def __init__(self, digits: int, line: int | None = None) -> None:
        self.digits, self.line = digits, line


def _parse_int(text: str) -> int | HugeInteger:
    digits = len(text.lstrip("-"))
    return HugeInteger(digits) if digits > 400 else int(text)


def loads(text: str) -> Any:
    """`json.loads(text)`, except that an integer too long for Python to parse becomes a placeholder that
    `json_value_problem` reports (with its field) instead of a ValueError without one. Raises
    json.JSONDecodeError and RecursionError as json.loads does."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        return json.loads(text, parse_int=_parse_int)


def _field_name(link: tuple | None) -> str:
    parts: list[str] = []
    while link is not None:
        link, key = link
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    name = "".join(reversed(parts)).removeprefix(".")
    return name if len(name) <= 120 else f"{name[:80]} ... {name[-30:]}"


def _bad_text(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _digits(number: int) -> int:
    """Decimal digits of `number`, without `str()` (which refuses past 4,300 digits)."""
    return int(abs(number).bit_length() * 0.30103) + 1


def _too_large(digits: int) -> str:
    return f"an integer of {digits:,} digits, beyond the range of any number this reads (at most about 1.8e308)"


def _shown(text: str) -> str:
    return ascii(text[:40]) + (" ..." if len(text) > 40 else "")


@dataclass
class ValueProblem:
    """What `json_value_problem` found: the message, the field's path (`a.b[2]`), the line where known."""

    message: str
    field: str
    line: int | None = None


def json_value_problem(value: Any, *, max_depth: int | None = None) -> ValueProblem | None:
    """What is wrong with the first value of a parsed JSON (or YAML) document
    that is an integer beyond the range of a float, a string or key holding a lone surrogate, or (with
    `max_depth`) an object or list nested deeper than `max_depth`; None when there is none. Walks without
    recursion, so any depth that parsed is safe to check."""
    stack: list[tuple[Any, int, tuple | None]] = [(value, 1, None)]
    while stack:
        item, depth, link = stack.pop()
        kind = type(item)
        if kind is str:
            if _bad_text(item):
                return ValueProblem(f"a string holding a lone surrogate, which is not text: {_shown(item)}",
                                    _field_name(link))
        elif kind is int:
            if item.bit_length() > _FLOAT_INT_BITS:
                return ValueProblem(_too_large(_digits(item)), _field_name(link))
        elif kind is HugeInteger:
            return ValueProblem(_too_large(item.digits), _field_name(link), item.line)
        elif kind is dict or kind is list:
            if max_depth is not None and depth > max_depth:
                return ValueProblem(f"objects and lists nested more than {max_depth} levels deep", _field_name(link))
            if kind is dict:
                for key, child in item.items():
                    if isinstance(key, str) and _bad_text(key):
                        return ValueProblem(f"a key holding a lone surrogate, which is not text: {_shown(key)}",
                                            _field_name(link))
                    stack.append((child, depth + 1, (link, key)))
            else:
                stack.extend((child, depth + 1, (link, i)) for i, child in enumerate(item))
    return None


def check_json_value(value: Any, path: Path | str, *, line: int | None = None, max_depth: int | None = None,
                     field_prefix: str = "") -> None:
    """InputError naming file, line and field for the problem `json_value_problem` finds in `value`, if any."""
    problem = json_value_problem(value, max_depth=max_depth)
    if problem is not None:
        name = ".".join(p for p in (field_prefix, problem.field) if p).replace(".[", "[")
        raise InputError(problem.message, path=str(path), line=line if line is not None else problem.line,
                         field=name or None)


def parse_json(text: str, path: Path | str, *, line: int | None = None, max_depth: int | None = None) -> Any:
    """`json.loads(text)`; InputError naming file and line for invalid JSON, JSON nested too deeply (or deeper
    than `max_depth`), holding more than MAX_JSON_ELEMENTS values, or a value `json_value_problem` refuses
    (naming its field too). `line`: the line of `text` in its file (a JSON-lines row), else the error's own line
    in `text`."""
    check_json_elements(text, path, line=line)
    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=str(path),
                         line=line if line is not None else exc.lineno) from exc
    except RecursionError as exc:
        raise too_deep(path, text, line=line) from exc
    check_json_value(value, path, line=line, max_depth=max_depth)
    return value


def load_untrusted_json(data: bytes | str, name: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The value of a JSON file an agent (or its code) wrote, `data` already read within a byte cap; InputError
    naming `name` (and line and field) when it is not UTF-8 text, not JSON, nested deeper than `max_depth`,
    holds more than MAX_JSON_ELEMENTS values, an integer beyond the range of a float or a lone surrogate. NaN and
    infinities are read as floats (they compare equal to nothing). The caller records the error as the agent's
    failure: nothing in the file can raise anything else."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=name) from exc
    return parse_json(data, name, max_depth=max_depth)


class NoOptions(BaseModel):
    """The options of an importer that takes none."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class Loaded(Generic[R]):
    """What one file (or folder) held: its records, plus warnings and what was left out on purpose."""

    path: Path
    format: str
    records: list[R] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class Importer(Protocol[R]):
    """Reads one format. `suffixes`: the file suffixes it reads (folder walks look at those files);
    `sniff_order`: lower is tried first by auto-detection (specific formats before generic ones)."""

    name: ClassVar[str]
    description: ClassVar[str]
    Options: ClassVar[type[BaseModel]]
    suffixes: ClassVar[tuple[str, ...]]
    sniff_order: ClassVar[int]

    def sniff(self, path: Path) -> bool: ...

    def load(self, path: Path, options: Any) -> Loaded[R]: ...


class ImporterRegistry(Registry[Importer[R]]):
    """The importers of one kind of record, by format name."""

    def get(self, name: str) -> Importer[R]:
        """The importer registered as `name`; ConfigError naming the known ones otherwise."""
        self.check_format(name)
        return self.create(name)

    def choices(self) -> list[str]:
        """`auto` followed by every registered format: what a `--format` option accepts."""
        return [AUTO, *self.names()]

    def check_format(self, fmt: str) -> str:
        """`fmt` if it is `auto` or a registered format; ConfigError listing the choices otherwise."""
        if fmt not in self and fmt != AUTO:
            raise ConfigError(f"unknown {self.kind} format '{fmt}'", hint="use one of: " + ", ".join(self.choices()))
        return fmt

    def in_sniff_order(self) -> list[Importer[R]]:
        importers = [self.get(name) for name in self.names()]
        return sorted(importers, key=lambda imp: (getattr(imp, "sniff_order", 50), imp.name))

    def suffixes(self) -> set[str]:
        """Every file suffix some importer reads."""
        return {suffix for imp in self.in_sniff_order() for suffix in imp.suffixes}

    def detect(self, path: Path) -> str | None:
        """The first format (in sniff order) whose importer recognises `path`, or None."""
        return next((imp.name for imp in self.in_sniff_order() if imp.sniff(path)), None)

    def option_names(self) -> set[str]:
        return {name for imp in self.in_sniff_order() for name in imp.Options.model_fields}

    def options(self, name: str, values: Mapping[str, Any]) -> BaseModel:
        """Importer `name`'s Options built from the entries of `values` it declares (others are for other
        importers). Raises InputError naming the field of a bad value."""
        model = self.get(name).Options
        try:
            return model.model_validate({k: v for k, v in values.items() if k in model.model_fields})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(str(first["msg"]).removeprefix("Value error, "),
                             field=str(first["loc"][0]) if first["loc"] else None) from exc

    def check_options(self, values: Mapping[str, Any], fmt: str = AUTO) -> None:
        """Validate `values` before anything is read: with a chosen format, against that importer alone (an option
        it does not take is a ConfigError); with `auto`, against every importer that declares a key (a key none
        declares is a ConfigError). A bad value is an InputError naming the field."""
        fmt = self.check_format(fmt)
        if fmt != AUTO:
            declared = set(self.get(fmt).Options.model_fields)
            unknown = sorted(set(values) - declared)
            if unknown:
                raise ConfigError(f"the {self.kind} format '{fmt}' takes no option {', '.join(unknown)}",
                                  hint="its options: " + (", ".join(sorted(declared)) or "none"))
            self.options(fmt, values)
            return
        unknown = sorted(set(values) - self.option_names())
        if unknown:
            raise ConfigError(f"no {self.kind} importer takes the option(s) {', '.join(unknown)}",
                              hint="known options: " + ", ".join(sorted(self.option_names())))
        for imp in self.in_sniff_order():
            if set(values) & set(imp.Options.model_fields):
                self.options(imp.name, values)

    def load(self, path: Path, fmt: str = AUTO, options: Mapping[str, Any] | None = None) -> Loaded[R]:
        """Read one file or folder in format `fmt` (or the detected one). Raises InputError when no importer
        recognises it or it is malformed, ConfigError for an unknown format."""
        name = self.check_format(fmt)
        if name == AUTO:
            detected = self.detect(path)
            if detected is None:
                raise InputError(f"cannot tell the {self.kind} format of this file", path=str(path),
                                 hint="pass --format " + "|".join(self.names()))
            name = detected
        try:
            return self.get(name).load(path, self.options(name, options or {}))
        except RecursionError as exc:  # nesting that parsed but is too deep to walk: the file's doing
            raise too_deep(path) from exc


__all__ = ["AUTO", "MAX_DOCUMENT_BYTES", "MAX_JSON_DEPTH", "MAX_JSON_ELEMENTS", "MAX_LINE_BYTES", "HugeInteger",
           "Importer", "ImporterRegistry", "Loaded", "NoOptions", "ValueProblem", "check_input", "check_json_elements",
           "check_json_value", "check_size", "import_root", "iter_lines", "json_value_problem", "load_untrusted_json",
           "loads", "nesting_line", "open_input", "outside_strings", "parse_json", "read_document", "reading_inside",
           "too_deep"]

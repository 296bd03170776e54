"""What every stage's CLI shares: the store chosen by --db, progress bars and console output.

Stage CLIs stay thin: parse flags, call `store()`, call the stage's function, print the result.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.segment import Segment
from rich.table import Table

from failatlas.core.errors import StoreError
from failatlas.core.store import Migration, Store, resolve_db_path
from failatlas.core.tables import BIDI_CONTROLS

# C0 controls but newline and tab, DEL and C1 controls: an escape sequence in text an agent, a task file or an
# imported file wrote (a conclusion, a question, a requirement) could recolour, clear or retitle the reader's
# terminal, or write its clipboard (OSC 52); and the bidirectional controls, which could reorder what is shown
# around them (tables.BIDI_CONTROLS); printed as \xNN or \uNNNN instead
_CONTROL = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")


def _visible(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else
                        f"\\u{ord(m.group()):04x}", text)


class SafeConsole(Console):
    """A rich Console whose printed text never carries a control character from the data it shows: each segment's
    text is cleaned before layout (`render_str`) and again after rendering (`Text` objects made elsewhere), so
    tables, panels and plain strings are covered alike; the console's own styles and cursor moves (segment
    styles and control segments, added after) are kept.

    Without a `width` it reads $COLUMNS when it prints, not once when it is made (rich's default): the CLI's two
    consoles are made at import, and a command run in a process that imported them earlier (a notebook, a test's
    CliRunner) prints at the width its environment says now."""

    def __init__(self, *args, width: int | None = None, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, width=width, **kwargs)
        if width is None:
            self._width = None  # rich fixed $COLUMNS here; the size is then read from the environment each time

    def render_str(self, text: str, **kwargs):  # noqa: ANN003, ANN201 - rich's signature
        return super().render_str(_visible(text), **kwargs)  # before layout, so widths count what is shown

    def render(self, renderable, options=None):  # noqa: ANN001, ANN201 - rich's signature
        for segment in super().render(renderable, options):
            if segment.control is None and _CONTROL.search(segment.text):
                yield Segment(_visible(segment.text), segment.style, segment.control)
            else:
                yield segment


# emoji=False: ':x:' in shown data ('root:x:0:0') stays text, never an emoji code rich replaces
console = SafeConsole(emoji=False)
err_console = SafeConsole(stderr=True, emoji=False)

T = TypeVar("T")


class _State:
    db: str | None = None
    lock_timeout: float = 120.0
    # Every package's migrations, set by the top-level CLI (`failatlas.cli`), which alone knows all stages.
    migrations: Callable[[], Sequence[Migration]] | None = None


state = _State()


def db_path() -> str:
    return str(resolve_db_path(state.db))


def store(*, create: bool = True) -> Store:
    """The store named by --db / $FAILATLAS_DB, migrated to the newest schema (created when `create`)."""
    s = Store(state.db, lock_timeout=state.lock_timeout)
    if create:
        if state.migrations is None:
            raise StoreError("this command was started without the failatlas CLI, which knows every stage's tables",
                             hint="run it as `failatlas ...`")
        s.migrate(state.migrations())
        return s
    if not s.path.exists():
        raise StoreError(
            f"no store at {s.path}",
            hint="create one with `failatlas db migrate` or a command that imports data, or pass --db PATH",
        )
    return s


def progress_enabled() -> bool:
    return os.environ.get("FAILATLAS_NO_PROGRESS") is None


def _columns() -> tuple:
    return TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()


@contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[callable]:
    """A progress bar on stderr; yields `advance(n=1)`. Silent when $FAILATLAS_NO_PROGRESS is set."""
    if not progress_enabled():
        yield lambda n=1: None
        return
    with Progress(*_columns(), console=err_console, transient=False) as prog:
        task = prog.add_task(description, total=total)
        yield lambda n=1: prog.advance(task, n)


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a progress bar."""
    items = list(items) if total is None and not hasattr(items, "__len__") else items
    n = total if total is not None else len(items)  # type: ignore[arg-type]
    with progress_bar(description, n) as advance:
        for item in items:
            yield item
            advance()


# -- progress with an estimate and lines printed above the bar (issue 20: bench run, cluster run) -------------------
class LiveProgress:
    """What `live_progress` yields: `advance(n)` moves the bar, `say(markup)` prints a line above it (or plainly,
    when progress is off), `describe(text)` renames the current step."""

    def __init__(self, progress: Progress | None, task: object | None) -> None:
        self._progress, self._task = progress, task

    def advance(self, n: float = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def describe(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def total(self, n: float) -> None:
        """Set how many steps there are, once that is known (a bar never reads "2/?")."""
        if self._progress is not None:
            self._progress.update(self._task, total=n)

    def say(self, markup: str) -> None:
        (self._progress.console if self._progress is not None else console).print(markup, highlight=False)


@contextmanager
def live_progress(description: str, total: float | None) -> Iterator[LiveProgress]:
    """A progress bar on stderr with steps done, elapsed time and an estimate of the time left; lines said through
    it print above the bar. Without a bar ($FAILATLAS_NO_PROGRESS) the lines still print."""
    from rich.progress import TimeRemainingColumn

    if not progress_enabled():
        yield LiveProgress(None, None)
        return
    with Progress(*_columns(), TextColumn("left"), TimeRemainingColumn(), console=err_console,
                  transient=False) as prog:
        yield LiveProgress(prog, prog.add_task(description, total=total))


# -- tables at any terminal width (issue 34: names are never cut with "…") -----------------------------------------
def fits(renderable: object, width: int | None = None) -> bool:
    """Whether `renderable` (a rich Table) prints at its natural width, nothing wrapped or cut, on `width`
    columns (default: the console's, which follows $COLUMNS)."""
    from rich.measure import Measurement

    width = width or console.width
    unbounded = console.options.update_width(1 << 16)  # a measure is clamped to the width it is given
    return Measurement.get(console, unbounded, renderable).maximum <= width


def compact_table(*headers: str, title: str | None = None) -> Table:
    """A table without vertical rules: one space between columns (not three characters), a rule under the
    header, a title on the left above it."""
    from rich import box

    return Table(*headers, box=box.SIMPLE_HEAD, title=title, title_justify="left", padding=(0, 0),
                 show_edge=False, title_style="bold")


def _column_lines(column: object) -> list[str]:
    """The lines of a column's header and cells, as printed."""
    from rich.text import Text

    texts = [column.header, *column.cells]  # type: ignore[attr-defined]
    return [line for cell in texts for line in (cell.plain if isinstance(cell, Text) else str(cell)).split("\n")]


def _least(column: object) -> int:
    """A column's narrowest width that breaks no word: its longest word."""
    return max([len(word) for line in _column_lines(column) for word in line.split()] or [1])


def _gaps(table: Table, columns: int | None = None) -> int:
    n = len(table.columns) if columns is None else columns
    return max(n - 1, 0) * (1 + 2 * (table.padding[1] if table.padding else 0))


def least_width(table: Table) -> int:
    """The narrowest width on which `fit_columns` lays `table` out without breaking a word."""
    return sum(_least(c) for c in table.columns) + _gaps(table)


def fit_columns(table: Table, width: int | None = None) -> Table:
    """Lay `table` out on `width` columns (default: the console's) deliberately: every column at least as wide as
    its longest word (a name is never broken inside a word, never ends in "…"), the room left shared in
    proportion to what each column's text needs beyond that; long texts wrap at spaces."""
    width = width or console.width
    gaps = _gaps(table)
    natural = [max([len(line) for line in _column_lines(c)] or [1]) for c in table.columns]
    least = [_least(c) for c in table.columns]
    for column in table.columns:
        column.overflow = "fold"
    room = width - gaps - sum(least)
    if sum(natural) + gaps <= width or room < 0:
        for column, n in zip(table.columns, least, strict=True):
            column.min_width = n
        return table
    want = [n - m for n, m in zip(natural, least, strict=True)]
    # exact widths, even with no room left: rich's own shrinking of a table at the limit cuts its last column
    shares = [m + (room * w) // max(sum(want), 1) for m, w in zip(least, want, strict=True)]
    for column, w in zip(table.columns, shares, strict=True):
        column.width = w
    return table


def split_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], *, names: int, keep: int = 0,
                  title: str, width: int | None = None, note: str | None = None,
                  justify: str = "right") -> list[Table]:
    """One table of `rows` (cells under `headers`) laid out on `width` columns (default: the console's) without
    ever dropping a column, where a rich table too wide for the terminal would drop its last ones. The first
    `names` columns name a row and the `keep` after them (e.g. its run count) are repeated in every part; the
    value columns after them are split, in order, into as few parts as fit (titled "TITLE (1 of 2)", ...). When
    the name columns leave no room, they are joined into one ("benchmark / agent"), which wraps at its spaces;
    only when even that leaves no room for one value column is the joined name broken inside a word (folded,
    never cut). Each part is laid out by `fit_columns`; `note` is the first part's caption. The columns after
    the names are aligned by `justify`."""
    width = width or console.width
    joined_header = " / ".join(headers[:names])
    layouts = [(list(headers[:names]), [list(r[:names]) for r in rows])]
    if names > 1:
        layouts.append(([joined_header], [[" / ".join(c for c in r[:names])] for r in rows]))
    lead = names + keep
    values = list(range(lead, len(headers)))

    def table(name_headers: list[str], name_cells: list[list[str]], part: list[int], label: str) -> Table:
        t = compact_table(*name_headers, *headers[names:lead], *(headers[i] for i in part), title=label)
        for column in t.columns[len(name_headers):]:
            column.justify = justify
        for cells, row in zip(name_cells, rows, strict=True):
            t.add_row(*cells, *row[names:lead], *(row[i] for i in part))
        return t

    def parts(name_headers: list[str], name_cells: list[list[str]]) -> list[list[int]] | None:
        probe = table(name_headers, name_cells, values, title)
        least = [_least(c) for c in probe.columns]
        n_lead = len(name_headers) + keep
        gap = _gaps(probe, 2)
        room = width - sum(least[:n_lead]) - _gaps(probe, n_lead)
        out: list[list[int]] = [[]]
        used = 0
        for i, w in zip(values, least[n_lead:], strict=True):
            if w + gap > room:
                return None
            if out[-1] and used + w + gap > room:
                out.append([])
                used = 0
            out[-1].append(i)
            used += w + gap
        return out

    candidates = [(p, layout) for layout in layouts if (p := parts(*layout)) is not None]
    if candidates:
        split, (name_headers, name_cells) = min(candidates, key=lambda c: len(c[0]))  # the first of equals
        folded = None
    else:  # the joined name alone is wider than the terminal: one value column per part, the name folded
        name_headers, name_cells = layouts[-1]
        split = [[i] for i in values] or [[]]
        folded = 1
    tables = []
    for n, part in enumerate(split, 1):
        label = title if len(split) == 1 else f"{title} ({n} of {len(split)})"
        t = table(name_headers, name_cells, part, label)
        if n == 1 and note:
            t.caption, t.caption_justify, t.caption_style = note, "left", "default"
        if folded:
            rest = sum(_least(c) for c in t.columns[1:]) + _gaps(t)
            t.columns[0].overflow, t.columns[0].width = "fold", max(width - rest, 1)
            for column in t.columns[1:]:
                column.min_width = _least(column)
            tables.append(t)
        else:
            tables.append(fit_columns(t, width))
    return tables

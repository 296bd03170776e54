"""What every stage's CLI shares: the store chosen by --db, progress bars and console output.

Stage CLIs stay thin: parse flags, call `store()`, call the stage's function, print the result.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from failatlas.core.errors import StoreError
from failatlas.core.store import Migration, Store, resolve_db_path

console = Console()
err_console = Console(stderr=True)

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


def fit_columns(table: Table, width: int | None = None) -> Table:
    """Lay `table` out on `width` columns (default: the console's) deliberately: every column at least as wide as
    its longest word (a name is never broken inside a word, never ends in "…"), the room left shared in
    proportion to what each column's text needs beyond that; long texts wrap at spaces."""
    from rich.text import Text

    width = width or console.width

    def lines(column: object) -> list[str]:
        texts = [column.header, *column.cells]  # type: ignore[attr-defined]
        return [line for cell in texts for line in (cell.plain if isinstance(cell, Text) else str(cell)).split("\n")]

    gaps = max(len(table.columns) - 1, 0) * (1 + 2 * (table.padding[1] if table.padding else 0))
    natural = [max([len(line) for line in lines(c)] or [1]) for c in table.columns]
    least = [max([len(word) for line in lines(c) for word in line.split()] or [1]) for c in table.columns]
    for column in table.columns:
        column.overflow = "fold"
    room = width - gaps - sum(least)
    if sum(natural) + gaps <= width or room <= 0:
        for column, n in zip(table.columns, least, strict=True):
            column.min_width = n
        return table
    want = [n - m for n, m in zip(natural, least, strict=True)]
    shares = [m + (room * w) // sum(want) for m, w in zip(least, want, strict=True)]
    for column, w in zip(table.columns, shares, strict=True):
        column.width = w
    return table

"""`failatlas db`: create, upgrade, describe and query (read-only) the store."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from failatlas.core.cli import console, db_path, store

app = typer.Typer(no_args_is_help=True)


@app.command()
def migrate() -> None:
    """Create the store if missing and apply every pending migration."""
    from failatlas.store import Store, all_migrations

    s = Store(db_path())
    applied = s.migrate(all_migrations())
    if applied:
        console.print(f"{s.path}: applied {len(applied)} migration(s): " + ", ".join(applied))
    else:
        console.print(f"{s.path}: schema is up to date")


@app.command()
def info() -> None:
    """Show the store's path, schema version and the row count of every table."""
    s = store(create=False)
    table = Table("table", "rows", title=str(s.path))
    with s.read() as conn:
        for name in s.tables():
            count = conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
            table.add_row(name, str(count))
    console.print(table)
    console.print(f"migrations applied: {len(s.applied_migrations())}")


FORMATS = ("table", "csv", "json")


@app.command()
def query(
    sql: Annotated[str, typer.Argument(metavar="SQL", help="One SELECT (or EXPLAIN) statement, e.g. \"SELECT agent, "
                                       "count(*) FROM runs GROUP BY agent\"; SHOW TABLES lists the tables.")],
    output: Annotated[str, typer.Option("--format", "-f", help="table (the terminal), csv or json.")] = "table",
    max_rows: Annotated[int, typer.Option(help="At most this many rows in the table format (csv and json print "
                                          "every row).", min=1)] = 100,
) -> None:
    """Query the store with SQL, read-only: one SELECT, WITH, SHOW, DESCRIBE or EXPLAIN statement; a write, ATTACH,
    COPY, SET or a file outside the store is refused. The tables and their columns: docs/STORE.md."""
    from failatlas.core.errors import ConfigError
    from failatlas.core.query import cell_text, read_query, to_csv, to_json

    if output not in FORMATS:
        raise ConfigError(f"unknown --format '{output}'", hint="choose one of: " + ", ".join(FORMATS))
    result = read_query(store(create=False), sql)
    if output == "csv":
        sys.stdout.write(to_csv(result))
        return
    if output == "json":
        sys.stdout.write(to_json(result))
        return
    _print_rows(result.columns, [[cell_text(v) if v is not None else None for v in row]
                                 for row in result.rows[:max_rows]])
    more = len(result.rows) - max_rows
    console.print(f"{len(result.rows)} row(s)" + (f"; the first {max_rows} shown (--max-rows, or --format csv "
                                                  "for all)" if more > 0 else ""), highlight=False)


def _print_rows(columns: list[str], rows: list[list[str | None]]) -> None:
    """Rows as a table laid out on the terminal (long texts wrap, never cut); where even that is too wide, one
    block per row, a column per line (as psql's expanded display)."""
    from failatlas.core.cli import compact_table, fit_columns, fits

    table = compact_table(*(escape(c) for c in columns))
    for row in rows:
        table.add_row(*(escape(v) if v is not None else "[dim]NULL[/]" for v in row))
    fitted = fit_columns(table)
    if fits(fitted) or not rows:
        console.print(fitted)
        return
    width = max(len(c) for c in columns)
    for k, row in enumerate(rows, 1):
        console.print(f"[bold]-- row {k}[/]", highlight=False)
        for column, value in zip(columns, row, strict=True):
            console.print(f"{escape(column):>{width}}: " + (escape(value) if value is not None else "[dim]NULL[/]"),
                          highlight=False, soft_wrap=True)

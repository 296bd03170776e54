"""`failatlas db`: create, upgrade and describe the store."""

from __future__ import annotations

import typer
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

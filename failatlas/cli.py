"""The `failatlas` command: one subcommand group per stage, each a thin layer over the stage's functions."""

from __future__ import annotations

import importlib
import sys
from typing import Annotated

import typer

from failatlas import __version__
from failatlas.cli_support import console, err_console, state
from failatlas.errors import FailAtlasError

app = typer.Typer(
    name="failatlas",
    help="Run AI-research-experiment benchmarks end to end and mine why agents fail.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# (name, module, attribute, help): each stage owns its own CLI module.
SUBCOMMANDS = [
    ("db", "failatlas.db_cli", "app", "Create, upgrade and describe the DuckDB store."),
    ("tasks", "bench_core.tasks.cli", "app", "Import, list and show benchmark tasks; prepare masked repositories."),
    ("sandbox", "bench_core.sandbox.cli", "app", "Build the sandbox image and clean up orphaned sandboxes."),
    ("bench", "bench_core.runs.cli", "app", "Run agents on tasks in sandboxes, score the runs, report metrics."),
    ("ingest", "ingest.cli", "app", "Collect raw failure insights from runs and from other tools' files."),
    ("embed", "embed.cli", "app", "Embed insights with sentence-transformers (cached by content)."),
    ("cluster", "cluster.cli", "app", "Cluster insights per phase and evaluate clusters against human labels."),
    ("taxonomy", "taxonomy.cli", "app", "Name failure types, build the hierarchy, export tables and figures."),
]


def _register() -> None:
    for name, module_name, attr, help_text in SUBCOMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # stage not present in this build
            raise
        app.add_typer(getattr(module, attr), name=name, help=help_text)


@app.callback()
def root(
    db: Annotated[
        str | None,
        typer.Option("--db", envvar="FAILATLAS_DB", help="DuckDB store file [default: ./failatlas.duckdb]."),
    ] = None,
    lock_timeout: Annotated[
        float, typer.Option(help="Seconds to wait while another process holds the store.")
    ] = 120.0,
) -> None:
    """FailAtlas: benchmark core and failure miner for AI-research agents."""
    state.db = db
    state.lock_timeout = lock_timeout


@app.command()
def version() -> None:
    """Print the FailAtlas version."""
    console.print(__version__)


@app.command(name="app")
def run_app(
    port: Annotated[int, typer.Option(help="Port for the Streamlit server.")] = 8501,
    headless: Annotated[bool, typer.Option(help="Do not open a browser.")] = True,
) -> None:
    """Open the Streamlit explorer over the store (read-only)."""
    from failatlas.app_launcher import launch

    launch(port=port, headless=headless)


_register()


def main() -> None:
    """Entry point: our errors become one line on stderr and a non-zero exit code, never a traceback."""
    try:
        app()
    except FailAtlasError as exc:
        err_console.print(f"[bold red]error:[/] {exc.one_line()}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted; re-run the same command to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()

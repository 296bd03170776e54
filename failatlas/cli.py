"""The `failatlas` command: one subcommand group per stage, each a thin layer over the stage's functions."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from failatlas import db_cli
from failatlas.bench_core.cli import bench as runs_cli
from failatlas.bench_core.cli import repos as repos_cli
from failatlas.bench_core.cli import sandbox as sandbox_cli
from failatlas.bench_core.cli import tasks as tasks_cli
from failatlas.cluster import cli as cluster_cli
from failatlas.core.cli import console, err_console, state
from failatlas.core.errors import FailAtlasError
from failatlas.core.llm import cli as llm_cli
from failatlas.core.version import __version__
from failatlas.embed import cli as embed_cli
from failatlas.ingest import cli as ingest_cli
from failatlas.store import all_migrations
from failatlas.taxonomy import cli as taxonomy_cli

app = typer.Typer(
    name="failatlas",
    help="Run AI-research-experiment benchmarks end to end and mine why agents fail.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each stage owns its own CLI module; this top layer alone names them all.
SUBCOMMANDS = [
    ("db", db_cli.app, "Create, upgrade and describe the DuckDB store."),
    ("tasks", tasks_cli.app, "Import, list and show benchmark tasks; prepare masked repositories."),
    ("repos", repos_cli.app, "Get task repositories into a local cache, pinned."),
    ("sandbox", sandbox_cli.app, "Build the sandbox image and clean up orphaned sandboxes."),
    ("bench", runs_cli.app, "Run agents on tasks in sandboxes, score the runs, report metrics."),
    ("ingest", ingest_cli.app, "Collect raw failure insights from runs and from other tools' files."),
    ("embed", embed_cli.app, "Embed insights with sentence-transformers (cached by content)."),
    ("cluster", cluster_cli.app, "Cluster insights per phase and evaluate clusters against human labels."),
    ("taxonomy", taxonomy_cli.app, "Name failure types, build the hierarchy, export tables and figures."),
    ("llm", llm_cli.app, "Show each LLM role's resolved configuration and what the calls spent."),
    ("label", __import__("failatlas.taxonomy.label_cli", fromlist=["app"]).app, "Label insights to learn from."),
]
for _name, _sub, _help in SUBCOMMANDS:
    app.add_typer(_sub, name=_name, help=_help)
state.migrations = all_migrations


@app.callback()
def root(
    db: Annotated[
        str | None,
        typer.Option("--db", envvar="FAILATLAS_DB", help="DuckDB store file (default: ./failatlas.duckdb)."),
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


@app.command()
def agents(
    show_all: Annotated[bool, typer.Option("--all", help="Also the hostile agents that attack the harness.")] = False,
) -> None:
    """List the agents `bench run --agent` takes, each with what it does."""
    from failatlas.bench_core.agents import AGENTS, agent_names

    table = Table("agent", "what it does")
    for name in agent_names(include_hidden=show_all):
        doc = (getattr(AGENTS.factory(name), "__doc__", None) or "").strip().split("\n")[0]
        table.add_row(name, escape(doc))
    console.print(table)


@app.command(name="app")
def run_app(
    port: Annotated[int, typer.Option(help="Port for the Streamlit server.")] = 8501,
    headless: Annotated[bool, typer.Option(help="Do not open a browser.")] = True,
    db: Annotated[str | None, typer.Option("--db", help="DuckDB store file (also accepted before `app`).")] = None,
    address: Annotated[str, typer.Option(
        help="Address to listen on. The default, 127.0.0.1, serves this machine only; 0.0.0.0 serves every "
             "network this machine is on (the app shows tasks' ground truth: put it behind a proxy with "
             "authentication).")] = "127.0.0.1",
) -> None:
    """Open the Streamlit explorer over the store (read-only)."""
    from failatlas.app_launcher import launch

    launch(port=port, headless=headless, db=db, address=address)


@app.command()
def demo(
    out: Annotated[str, typer.Option(help="Folder for the paper tables and figures.")] = "failatlas-demo",
    sandbox: Annotated[str, typer.Option(
        help="auto (docker where its engine answers, else bwrap), docker, bwrap, or local (trusted agents only: "
        "it isolates nothing).")] = "auto",
    workers: Annotated[int, typer.Option(help="Runs in parallel.")] = 2,
) -> None:
    """The main job: run the mini-suite with the reference and fault-injecting agents, score, mine, build the
    taxonomy, export tables and figures. Offline by default; an LLM endpoint adds the react agent, LLM judges
    and LLM names. Re-running does only what is missing."""
    from pathlib import Path

    from failatlas.bench_core.sandbox import resolve_sandbox_kind
    from failatlas.core.cli import db_path, store
    from failatlas.demo import run_demo

    sandbox = resolve_sandbox_kind(sandbox, say=lambda text: console.print(text, highlight=False))
    result = run_demo(store(), out_dir=Path(out), sandbox=sandbox, workers=workers,
                      say=lambda text: console.print(text, highlight=False))
    console.print(f"\n[bold]done in {result.seconds:.0f} s[/]: {result.runs} runs, {result.insights} insights, "
                  f"taxonomy {result.taxonomy_id}")
    console.print(f"store:   {Path(db_path()).resolve()}")
    console.print(f"tables and figures: {Path(out).resolve()}/ (scores/, taxonomy/)")
    console.print(f"explore: failatlas --db {db_path()} app   (then open http://localhost:8501)")




def main() -> None:
    """Entry point: our errors become one line on stderr and a non-zero exit code, never a traceback."""
    try:
        app()
    except FailAtlasError as exc:
        # the message quotes user input, task files and git's output: shown as text, never read as markup
        err_console.print(f"[bold red]error:[/] {escape(exc.one_line())}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted; re-run the same command to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()

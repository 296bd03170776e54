"""The `failatlas` command: one subcommand group per stage, each a thin layer over the stage's functions."""

from __future__ import annotations

import copy
import importlib
import sys
import textwrap
from typing import TYPE_CHECKING, Annotated

import click
import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    from collections.abc import Sequence

    from click import Command, Context, HelpFormatter

# Each stage owns its own CLI module; this top layer alone names them all. They are imported when their group
# runs, never for `failatlas --help` or `failatlas version` (each would pull DuckDB, Polars, the stages).
SUBCOMMANDS = [
    ("db", "failatlas.db_cli", "Create, upgrade, describe and query (read-only, SQL) the DuckDB store."),
    ("tasks", "failatlas.bench_core.cli.tasks", "Import, list and show benchmark tasks; prepare masked repositories."),
    ("repos", "failatlas.bench_core.cli.repos", "Get task repositories into a local cache, pinned."),
    ("sandbox", "failatlas.bench_core.cli.sandbox", "Build the sandbox image and clean up orphaned sandboxes."),
    ("bench", "failatlas.bench_core.cli.bench", "Run agents on tasks in sandboxes, score the runs, report metrics."),
    ("ingest", "failatlas.ingest.cli", "Collect raw failure insights from runs and from other tools' files."),
    ("embed", "failatlas.embed.cli", "Embed insights with sentence-transformers (cached by content)."),
    ("cluster", "failatlas.cluster.cli", "Cluster insights per phase and evaluate clusters against human labels."),
    ("taxonomy", "failatlas.taxonomy.cli", "Name failure types, build the hierarchy, export tables and figures."),
    ("llm", "failatlas.core.llm.cli", "Show each LLM role's resolved configuration and what the calls spent."),
    ("label", "failatlas.taxonomy.label_cli", "Label insights: `taxonomy build` learns from them."),
]
_LAZY = {name: (module, help_) for name, module, help_ in SUBCOMMANDS}
# commands that never open the store: the root callback leaves the store's plumbing unimported for them
_NO_STORE = frozenset({"version"})


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """`text` wrapped at spaces only, its paragraphs kept: an option's name (`--no-fit-definitions`) or a
    hyphenated word is never broken, a word longer than the line stands alone on it."""
    lines: list[str] = []
    for paragraph in text.split("\n\n"):
        if lines:
            lines.append("")
        lines += textwrap.wrap(" ".join(paragraph.split()), max(width, 1), initial_indent=indent,
                               subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)
    return lines


class _HelpFormatter(typer.Context.formatter_class):  # Typer's own copy of Click's formatter
    """Click's help layout (issue 42): a text under its option's name when the name is long, wrapped at the
    terminal's width at spaces. Typer's Rich panels put the name, its negation and its type in columns of their
    own and left a help text about 19 characters at 80 columns, cutting the longest ones with "…". Lines are
    at most 120 columns on a wider terminal (Click's own limit, 80, wasted a wide one)."""

    def __init__(self, indent_increment: int = 2, width: int | None = None, max_width: int | None = None) -> None:
        super().__init__(indent_increment, width, max_width or 120)

    def write_text(self, text: str) -> None:
        self.write("\n".join(_wrap(text, self.width, " " * self.current_indent)) + "\n")

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        first_col = min(max((len(term) for term, _ in rows), default=0), col_max) + col_spacing
        pad = " " * (self.current_indent + first_col)
        for term, text in rows:
            self.write(f"{'':>{self.current_indent}}{term}")
            if not text:
                self.write("\n")
                continue
            lines = _wrap(text, max(self.width - first_col - self.current_indent, 20)) or [""]
            if len(term) <= first_col - col_spacing:
                self.write(" " * (first_col - len(term)))
            else:
                self.write("\n" + pad)
            self.write(lines[0] + "\n" + "".join(f"{pad}{line}\n" if line else "\n" for line in lines[1:]))


class _HelpContext(typer.Context):
    formatter_class = _HelpFormatter


def _help_layout(command: Command) -> Command:
    """`command` and its subcommands print their help through `_HelpFormatter`; a group lists each subcommand
    with the first paragraph of its help, whole (Click cut it at 45 characters or at its first full stop)."""
    command.rich_markup_mode = None  # type: ignore[attr-defined]  # help only: errors keep the root's layout
    command.context_class = _HelpContext
    if not command.short_help and command.help:
        command.short_help = " ".join(command.help.split("\n\n")[0].split())
    for sub in (getattr(command, "commands", None) or {}).values():
        _help_layout(sub)
    return command


class _LazyGroup(TyperGroup):
    """The root group: each stage's group is imported when it is invoked; help listings name it from
    `SUBCOMMANDS` without importing it."""

    _listing = False
    context_class = _HelpContext

    def list_commands(self, ctx: Context) -> list[str]:
        return [*_LAZY, *super().list_commands(ctx)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in _LAZY:
            command = super().get_command(ctx, cmd_name)
            if command is None:
                return None
            return _help_layout(command if cmd_name in _NO_STORE else _adopt(command))
        module, help_ = _LAZY[cmd_name]
        if self._listing:  # a stand-in that names the group and its help
            return TyperGroup(name=cmd_name, help=help_, short_help=help_)
        # always a group: typer makes an app of one command (embed's `run`) that command itself
        command = typer.main.get_group(importlib.import_module(module).app)
        command.name, command.help = cmd_name, command.help or help_
        return _help_layout(_adopt(command))

    def get_params(self, ctx: Context) -> list:
        return _flags_without_type(super().get_params(ctx))

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super(TyperGroup, self).format_help(ctx, formatter)  # Click's layout, as every command's (`_help_layout`)
        finally:
            self._listing = False


_DB_HELP = "DuckDB store file (default: ./failatlas.duckdb)."


def _db_after_command(_ctx: object, _param: object, value: str | None) -> str | None:
    """`--db` given after a subcommand's name: it names the store as the root's `--db` does (the root's callback
    ran first, so this one wins where both are given)."""
    if value is not None:
        from failatlas.core.cli import state

        state.db = value
    return value


def _db_option() -> object:
    """The root's `--db` as an option of a subcommand: it sets the store and is no argument of the function."""
    option = copy.copy(next(p for p in typer.main.get_command(app).params if p.name == "db"))
    option.callback, option.expose_value, option.envvar, option.show_envvar = _db_after_command, False, None, False
    option.help = _DB_HELP[:-1] + "; also accepted before the command."
    return option


def _flags_without_type(params: list) -> list:
    """A flag takes no value: its help line shows none (typer prints `<bool>` beside --help and every flag)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


def _adopt(command: Command) -> Command:
    """`failatlas SUB ... --db X` works as `failatlas --db X SUB ...` for every command that opens the store, and
    no flag's help prints a type."""
    for sub in getattr(command, "commands", {}).values():
        _adopt(sub)
    if getattr(command, "commands", None) is None and not any("--db" in p.opts for p in command.params):
        command.params.append(_db_option())
    _flags_without_type(command.params)
    help_option = command.get_help_option(click.Context(command))
    _flags_without_type([help_option] if help_option is not None else [])
    return command


app = typer.Typer(
    name="failatlas",
    cls=_LazyGroup,
    help="Run AI-research-experiment benchmarks end to end and mine why agents fail.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _all_migrations():  # noqa: ANN202 - the store's migrations, imported only when a command opens the store
    from failatlas.store import all_migrations

    return all_migrations()


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option("--db", envvar="FAILATLAS_DB", help=_DB_HELP),
    ] = None,
    lock_timeout: Annotated[
        float, typer.Option(help="Seconds to wait while another process holds the store.")
    ] = 120.0,
) -> None:
    """FailAtlas: benchmark core and failure miner for AI-research agents."""
    if ctx.invoked_subcommand in _NO_STORE:
        return
    from failatlas.core.cli import state

    state.db = db
    state.lock_timeout = lock_timeout
    state.migrations = _all_migrations


@app.command()
def version() -> None:
    """Print the FailAtlas version."""
    from failatlas.core.version import __version__

    typer.echo(__version__)


@app.command()
def agents(
    show_all: Annotated[bool, typer.Option("--all", help="Also the hostile agents that attack the harness.")] = False,
) -> None:
    """List the agents `bench run --agent` takes, each with what it does."""
    from rich.markup import escape

    from failatlas.bench_core.agents import agent_description, agent_names
    from failatlas.core.cli import compact_table, console, fit_columns

    table = compact_table("agent", "what it does")
    for name in agent_names(include_hidden=show_all):
        table.add_row(name, escape(agent_description(name)))
    console.print(fit_columns(table))


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
    """Open the Streamlit explorer over the store; it writes only what you do in it (labels, taxonomy edits)."""
    from failatlas.app_launcher import launch

    launch(port=port, headless=headless, db=db, address=address)


@app.command()
def demo(
    out: Annotated[str, typer.Option(help="Folder for the paper tables and figures.")] = "failatlas-demo",
    sandbox: Annotated[str, typer.Option(
        help="auto (docker where its engine answers, else bwrap), docker, bwrap, or local (trusted agents only: "
        "it isolates nothing).")] = "auto",
    workers: Annotated[int, typer.Option(
        help="Runs in parallel (3: on 2 cores a third keeps them busy while the others wait on Docker).")] = 3,
    twins: Annotated[bool, typer.Option(
        help="Also run every agent on the tasks' impossible twins: the cheat rate beside the scores (--no-twins: "
        "the scores only).")] = True,
) -> None:
    """The main job: run the mini-suite with the reference and fault-injecting agents (and on its impossible
    twins, for the cheat rate), score, mine, build the taxonomy, export tables and figures. Offline by default; an
    LLM endpoint adds the react agent, LLM judges and LLM names. Re-running does only what is missing."""
    from pathlib import Path

    from failatlas.bench_core.sandbox import resolve_sandbox_kind
    from failatlas.core.cli import console, db_path, store
    from failatlas.demo import run_demo

    sandbox = resolve_sandbox_kind(sandbox, say=lambda text: console.print(text, highlight=False))
    result = run_demo(store(), out_dir=Path(out), sandbox=sandbox, workers=workers, twins=twins,
                      say=lambda text: console.print(text, highlight=False))
    twin_runs = f" (and {result.twin_runs} on impossible twins)" if result.twin_runs else ""
    console.print(f"\n[bold]done in {result.seconds:.0f} s[/]: {result.runs} runs{twin_runs}, {result.insights} "
                  f"insights, taxonomy {result.taxonomy_id}")
    console.print(f"store:   {Path(db_path()).resolve()}")
    console.print(f"tables and figures: {Path(out).resolve()}/ (scores/, taxonomy/)")
    console.print(f"explore: failatlas --db {db_path()} app   (then open http://localhost:8501)")




def main() -> None:
    """Entry point: our errors become one line on stderr and a non-zero exit code, never a traceback."""
    from failatlas.core.errors import FailAtlasError

    try:
        app()
    except SystemExit as exc:
        if exc.code == 130:  # Typer turns Ctrl-C into exit 130, silently
            print("interrupted; re-run the same command to resume", file=sys.stderr)
        raise
    except FailAtlasError as exc:
        from rich.markup import escape

        from failatlas.core.cli import err_console

        # the message quotes user input, task files and git's output: shown as text, never read as markup
        err_console.print(f"[bold red]error:[/] {escape(exc.one_line())}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted; re-run the same command to resume", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()

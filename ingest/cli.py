"""`failatlas ingest`: collect raw failure insights from files and from runs; show what is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from pydantic import BaseModel, ValidationError
from rich.table import Table

from failatlas.core.cli import console, err_console, store
from failatlas.core.errors import ConfigError, InputError
from failatlas.ingest.files import run_file
from failatlas.ingest.importers import INSIGHT_IMPORTERS
from failatlas.ingest.model import PHASES, FileIngestParams, IngestResult, RunsIngestParams
from failatlas.ingest.runs import run_runs
from failatlas.ingest.stats import insight_stats

app = typer.Typer(no_args_is_help=True)
EXTRACTORS = get_args(RunsIngestParams.model_fields["extractor"].annotation)


def _params(model: type[BaseModel], **values: Any) -> Any:
    try:
        return model(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from exc


def _print_result(result: IngestResult) -> None:
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    for item in result.skipped:
        err_console.print(f"skipped: {item}", highlight=False, soft_wrap=True)
    for item in result.failed:
        err_console.print(f"[red]failed:[/] {item}", highlight=False, soft_wrap=True)
    console.print(result.summary(), highlight=False)


_FLAGS = {"text_field": "--text", "text_column": "--text-column", "phase_column": "--phase-column",
          "label_column": "--label-column", "default_phase": "--phase"}


@app.command("file")
def file_command(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to import.")],
    fmt: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(INSIGHT_IMPORTERS.choices())}.")
    ] = "auto",
    text: Annotated[
        str | None,
        typer.Option("--text", help="TRAIL: insight text field, description|evidence (default: description)."),
    ] = None,
    text_column: Annotated[
        str | None, typer.Option(help="JSONL/CSV: column holding the insight text (default: text).")
    ] = None,
    phase_column: Annotated[
        str | None, typer.Option(help="JSONL/CSV: column holding the phase (default: phase).")
    ] = None,
    label_column: Annotated[
        str | None, typer.Option(help="JSONL/CSV: column holding a human label (default: label).")
    ] = None,
    phase: Annotated[
        str | None, typer.Option(help=f"Phase where a file gives none: {', '.join(PHASES)} (default: other).")
    ] = None,
) -> None:
    """Import insights from JSONL/CSV, TRAIL, EXP-Bench judge outputs or Inspect AI logs (all-or-nothing)."""
    # only what the user set: each importer keeps its own defaults, and an option no importer of the chosen
    # format takes is an error naming the flag
    given = {"text_field": text, "text_column": text_column, "phase_column": phase_column,
             "label_column": label_column, "default_phase": phase}
    options = {field: value for field, value in given.items() if value is not None}
    try:
        result = run_file(store(), _params(FileIngestParams, paths=paths, format=fmt, options=options))
    except (InputError, ConfigError) as exc:  # name the command's flags, not the importers' field names
        message, hint = str(exc), exc.hint
        for field, flag in _FLAGS.items():
            message = message.replace(f"field '{field}'", f"option {flag}").replace(field, flag)
            hint = hint.replace(field, flag) if hint else hint
        if (message, hint) == (str(exc), exc.hint):
            raise
        raise type(exc)(message, hint=hint) from exc
    _print_result(result)


@app.command("runs")
def runs_command(
    extractor: Annotated[str, typer.Option(help=f"One of: {', '.join(EXTRACTORS)}.")] = "deterministic",
    run: Annotated[list[str] | None, typer.Option("--run", help="Only this run id (repeatable).")] = None,
    redo: Annotated[bool, typer.Option(help="LLM: extract again from runs already extracted.")] = False,
    rebuild: Annotated[bool, typer.Option(
        help="Deterministic: replace what this extractor stored before with a fresh mining (after an upgrade; "
             "then embed, cluster and build the taxonomy again).")] = False,
) -> None:
    """Extract one statement per failure (with its phase, kind and object) from runs' judge verdicts, monitor
    findings and validator outcomes."""
    params = _params(RunsIngestParams, extractor=extractor, run_ids=run or None, redo=redo, rebuild=rebuild)
    result = run_runs(store(), params)
    _print_result(result)
    if result.failed:  # the LLM extractor failed on some runs: say so in the exit code (re-running retries them)
        err_console.print(f"{len(result.failed)} run(s) failed; run the same command again to retry them",
                          highlight=False)
        raise typer.Exit(1)


@app.command("stats")
def stats_command() -> None:
    """Show stored insights and occurrences per phase and origin."""
    rows = insight_stats(store(create=False))
    table = Table("phase", "origin", "insights", "occurrences", "labelled")
    for row in rows:
        table.add_row(row.phase, row.origin, str(row.insights), str(row.occurrences), str(row.labelled))
    console.print(table)
    if not rows:
        console.print("no insights yet: run `failatlas ingest file PATH` or `failatlas ingest runs`")

"""`failatlas label`: a person's labels on insights (a thin layer over `taxonomy.labels`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from failatlas.core.cli import console, store

app = typer.Typer(
    no_args_is_help=True,
    help="Label insights with a category (a seed's, as you spell it, or a new name). Labels are kept by the"
    " insight's text, so they survive `taxonomy build` and a re-run of `ingest`; the next `taxonomy build` learns"
    " from them (with the seed's examples). Labels imported data already carries (insight_sources.label, e.g."
    " TRAIL's categories) are ground truth for evaluation and never train, unless you pass that file to"
    " `taxonomy build --examples`.",
)


@app.command()
def add(
    insight_ids: Annotated[list[str] | None, typer.Argument(help="Insight ids to label.")] = None,
    label: Annotated[str | None, typer.Option("--as", help="The category, as you spell it.")] = None,
    type_id: Annotated[
        str | None, typer.Option("--type", help="Label every insight of this failure type (e.g. other/T03).")
    ] = None,
    taxonomy_id: Annotated[
        str | None, typer.Option("--taxonomy", "-t", help="Taxonomy of --type (default: the newest).")
    ] = None,
    labels_file: Annotated[
        Path | None, typer.Option("--labels", help="JSONL/JSON or CSV file: one row per statement, columns text and"
                                  " label (all or nothing).")
    ] = None,
) -> None:
    """Label insights by id, a whole failure type (--type), or statements from a file (--labels)."""
    from failatlas.core.errors import ConfigError
    from failatlas.taxonomy.labels import label_file, label_insights, label_type

    s = store()
    if labels_file is not None:
        if insight_ids or type_id or label:
            raise ConfigError("--labels takes its labels from the file", hint="pass ids and --as, or --labels alone")
        n = label_file(s, labels_file)
    elif label is None:
        raise ConfigError("say which category: --as NAME", hint="e.g. failatlas label add 3f2a... --as 'Timeout'")
    elif type_id is not None:
        if insight_ids:
            raise ConfigError("pass insight ids or --type, not both")
        n = label_type(s, type_id, label, taxonomy_id)
    elif insight_ids:
        n = label_insights(s, insight_ids, label)
    else:
        raise ConfigError("nothing to label", hint="pass insight ids, --type TYPE_ID or --labels FILE")
    total = s.query("SELECT count(*) FROM insight_labels")[0][0]
    console.print(f"labelled {n} distinct statement(s); {total} labelled in all. `failatlas taxonomy build` learns"
                  " from them.", highlight=False)


@app.command(name="list")
def list_(
    label: Annotated[str | None, typer.Option(help="Only this label.")] = None,
) -> None:
    """List the stored labels (one row per distinct statement)."""
    from failatlas.taxonomy.labels import list_labels

    rows = [r for r in list_labels(store()) if label is None or r.label == label]
    table = Table("label", "text", "given as", title=f"{len(rows)} labelled distinct statement(s)")
    for r in rows:
        text = r.text if len(r.text) <= 120 else r.text[:117] + "..."
        table.add_row(Text(r.label), Text(text), Text(r.source))  # Text: markup in a label prints as written
    console.print(table, highlight=False)


@app.command()
def remove(
    insight_ids: Annotated[list[str] | None, typer.Argument(help="Insight ids whose labels go.")] = None,
    label: Annotated[str | None, typer.Option(help="Remove every label with this name.")] = None,
) -> None:
    """Remove labels: those of some insights, or every label of one name."""
    from failatlas.core.errors import ConfigError
    from failatlas.taxonomy.labels import remove_labels

    if not insight_ids and label is None:
        raise ConfigError("nothing to remove", hint="pass insight ids or --label NAME")
    n = remove_labels(store(), insight_ids=insight_ids or (), label=label)
    console.print(f"removed {n} label(s)", highlight=False)

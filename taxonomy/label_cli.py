"""`failatlas label`: a person's labels on insights (a thin layer over `taxonomy.labels`)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from failatlas.core.cli import console, store

if TYPE_CHECKING:
    from failatlas.taxonomy.labels import UserLabel

NOT_HERE = "not in this store"


class OnUnmatched(StrEnum):
    """What `label add --labels` does with rows matching no statement of the store (labels.Unmatched)."""

    refuse = "refuse"
    skip = "skip"
    keep = "keep"

app = typer.Typer(
    no_args_is_help=True,
    help="Label insights with a category (a seed's, as you spell it, or a new name). Labels are kept by the"
    " insight's text, so they survive `taxonomy build` and a re-run of `ingest`; the next `taxonomy build` learns"
    " from them (with the seed's examples). Labels imported data already carries (insight_sources.label, e.g."
    " TRAIL's categories) are ground truth for evaluation and never train, unless you pass that file to"
    " `taxonomy build --examples`.",
)


ID_HELP = ("Insight ids, or unique prefixes of at least 4 characters. Find them with `failatlas label list` (the"
           " labelled ones), `failatlas taxonomy show --definitions` (an example insight per type) or the app's"
           " drill-down (each insight's view).")


@app.command()
def add(
    insight_ids: Annotated[list[str] | None, typer.Argument(help=ID_HELP)] = None,
    label: Annotated[str | None, typer.Option("--as", help="The category, as you spell it.")] = None,
    type_id: Annotated[
        str | None, typer.Option("--type", help="Label every insight of this failure type (e.g. other/T03).")
    ] = None,
    taxonomy_id: Annotated[
        str | None, typer.Option("--taxonomy", "-t", help="Taxonomy of --type (default: the current one).")
    ] = None,
    labels_file: Annotated[
        Path | None, typer.Option("--labels", help="JSONL/JSON or CSV file: one row per statement, columns text and"
                                  " label (all or nothing).")
    ] = None,
    unmatched: Annotated[
        OnUnmatched, typer.Option(
            "--unmatched",
            help="With --labels, rows whose text matches no statement of the store: 'refuse' (the default: a typo"
            " must not become a silent label; their lines are named and nothing is written), 'skip' (store the"
            " other rows, name the skipped lines) or 'keep' (store them too: a label is kept by its text, so it"
            " may come before the ingest that brings its statement; until then `label list` shows it as not in"
            " this store, and `taxonomy build`, `embed tune` and `taxonomy show --quality` use it like any"
            " other label).")
    ] = OnUnmatched.refuse,
) -> None:
    """Label insights by id, a whole failure type (--type), or statements from a file (--labels)."""
    from failatlas.core.errors import ConfigError
    from failatlas.taxonomy.labels import count_labels, label_file, label_insights, label_type, some

    s = store()
    notes = []
    if labels_file is not None:
        if insight_ids or type_id or label:
            raise ConfigError("--labels takes its labels from the file", hint="pass ids and --as, or --labels alone")
        done = label_file(s, labels_file, unmatched=unmatched.value)
        n = done.n_labelled
        if done.unmatched_lines:
            lines = some([line for line, _ in done.unmatched_lines])
            k = len(done.unmatched_lines)
            notes.append(f"skipped {k} row(s) of {labels_file.name} that match no statement in this store: line(s)"
                         f" {lines}" if unmatched is OnUnmatched.skip else
                         f"kept {k} row(s) of {labels_file.name} that match no statement in this store (line(s)"
                         f" {lines}): `taxonomy build`, `embed tune` and `taxonomy show --quality` use them like"
                         " the others; `label list` shows them as not in this store")
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
    for note in notes:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    console.print(f"labelled {n} distinct statement(s); the store now holds {count_labels(s)} labelled statements."
                  " `failatlas taxonomy build` learns from them.", highlight=False)


@app.command(name="list")
def list_(
    label: Annotated[str | None, typer.Option(help="Only this label.")] = None,
) -> None:
    """List the stored labels, one row per distinct statement: the label, an insight of this store with that
    statement (its id, for `label add` / `label remove`; "not in this store" where none has it), the statement
    (cut with "…" at the terminal's width) and how the label was given."""
    from failatlas.taxonomy.labels import list_labels

    rows = [r for r in list_labels(store()) if label is None or r.label == label]
    orphans = sum(not r.insight_ids for r in rows)
    title = f"{len(rows)} labelled distinct statement(s)" + (
        f"; {orphans} not in this store (`taxonomy build`, `embed tune` and `taxonomy show --quality` use them"
        " too)" if orphans else "")
    console.print(_list_table(rows, title), highlight=False)


@app.command()
def remove(
    insight_ids: Annotated[list[str] | None, typer.Argument(help="Insight ids (or unique prefixes) whose labels"
                                                            " go.")] = None,
    label: Annotated[str | None, typer.Option(help="Remove every label with this name.")] = None,
) -> None:
    """Remove labels: those of some insights, or every label of one name."""
    from failatlas.core.errors import ConfigError
    from failatlas.taxonomy.labels import remove_labels

    if not insight_ids and label is None:
        raise ConfigError("nothing to remove", hint="pass insight ids or --label NAME")
    n = remove_labels(store(), insight_ids=insight_ids or (), label=label)
    nothing = " (no label was on these insights' statements)" if n == 0 else ""
    console.print(f"removed {n} label(s){nothing}", highlight=False)


def _list_table(rows: list[UserLabel], title: str) -> Table:
    """The labels on the console's width: each insight id whole (a further insight with the same statement as
    "+N"), the label and how it was given wrapped within a cap, the statement on one line cut with "…"."""
    from failatlas.core.cli import compact_table

    ids = [NOT_HERE if not r.insight_ids else r.insight_ids[0] + (
        f" +{len(r.insight_ids) - 1}" if len(r.insight_ids) > 1 else "") for r in rows]
    widths = [min(max([len(r.label) for r in rows] + [5]), 30), max([len(i) for i in ids] + [7]),
              min(max([len(r.source) for r in rows] + [8]), 24)]
    text_width = max(console.width - sum(widths) - 3, 12)  # compact_table: one space between columns
    table = compact_table("label", "insight", "text", "given as", title=title)
    for column, width in zip(table.columns, (widths[0], widths[1], text_width, widths[2]), strict=True):
        column.width = width
    table.columns[1].no_wrap = True
    table.columns[2].no_wrap, table.columns[2].overflow = True, "ellipsis"
    for r, shown_id in zip(rows, ids, strict=True):
        table.add_row(Text(r.label), Text(shown_id), Text(r.text), Text(r.source))  # Text: markup prints as written
    return table

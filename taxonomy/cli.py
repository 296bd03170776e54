"""`failatlas taxonomy`: build, list, show, assign and export taxonomy snapshots (a thin layer
over `taxonomy`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from failatlas.core.cli import console, store
from failatlas.taxonomy.export import export_formats
from failatlas.taxonomy.labelling import LABELLERS

app = typer.Typer(no_args_is_help=True)

TaxonomyArg = Annotated[
    str | None, typer.Argument(help="Taxonomy id or version number (default: the newest).")
]


@app.command()
def build(
    clustering: Annotated[
        list[str] | None,
        typer.Option(
            "--clustering",
            "-c",
            help="Clustering id to build from (repeat per phase) (default: newest per phase).",
        ),
    ] = None,
    labeller: Annotated[
        str, typer.Option(help="How types are named: " + " or ".join(sorted(LABELLERS)) + ".")
    ] = "offline",
    merge_threshold: Annotated[
        float, typer.Option(help="Centroid cosine above which types may merge.")
    ] = 0.9,
    assign_threshold: Annotated[
        float, typer.Option(help="Least cosine for an insight to join a type.")
    ] = 0.45,
    max_categories: Annotated[int, typer.Option(help="Most categories per phase.")] = 5,
    seed: Annotated[int, typer.Option(help="Random seed recorded with the snapshot.")] = 0,
) -> None:
    """Build a new taxonomy snapshot from clusterings: name, merge, group into categories, assign members."""
    from failatlas.taxonomy.build import run
    from failatlas.taxonomy.model import BuildParams

    params = BuildParams(
        clustering_ids=clustering or None,
        labeller=labeller,
        merge_threshold=merge_threshold,
        assign_threshold=assign_threshold,
        max_categories=max_categories,
        seed=seed,
    )
    tax = run(store(), params)
    table = Table("id", "category", "name", "n", "method", title=f"taxonomy v{tax.version} ({tax.id})")
    cats = {c.id: c.name for c in tax.categories}
    for t in tax.types:
        table.add_row(
            t.id, cats.get(t.category_id, t.category_id), t.name, str(t.n_insights), t.naming_method
        )
    console.print(table)
    console.print(
        f"{tax.id}: {len(tax.types)} failure types in {len(tax.categories)} categories; "
        f"{tax.n_assigned} insights assigned, {tax.n_unassigned} unassigned"
    )


@app.command(name="list")
def list_() -> None:
    """List taxonomy snapshots, newest first."""
    from failatlas.taxonomy.read import list_taxonomies

    frame = list_taxonomies(store(create=False))
    table = Table("version", "id", "created", "types", "categories", "insights", "embed model")
    for r in frame.iter_rows(named=True):
        table.add_row(
            str(r["version"]),
            r["id"],
            str(r["created_at"])[:19],
            str(r["n_types"]),
            str(r["n_categories"]),
            str(r["n_insights"]),
            r["embed_model"],
        )
    console.print(table)


@app.command()
def show(
    taxonomy_id: TaxonomyArg = None,
    by: Annotated[str | None, typer.Option(help="Break down by agent, model or benchmark.")] = None,
    unit: Annotated[str, typer.Option(help="Count insights, or runs / tasks affected.")] = "insights",
    n_boot: Annotated[int, typer.Option(help="Bootstrap draws for the 95% CIs.")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    definitions: Annotated[
        bool, typer.Option(help="Also print each type's definition and an example.")
    ] = False,
) -> None:
    """Show a taxonomy's failure types with prevalence (counts, shares, 95% CIs)."""
    from failatlas.taxonomy.prevalence import prevalence
    from failatlas.taxonomy.read import load_taxonomy

    s = store(create=False)
    tax = load_taxonomy(s, taxonomy_id)
    frame = prevalence(s, tax.id, by=by, unit=unit, n_boot=n_boot, seed=seed)  # type: ignore[arg-type]
    table = Table(
        *(["group"] if by else []),
        "phase",
        "category",
        "failure type",
        "count",
        "total",
        "share %",
        "95% CI %",
        title=f"taxonomy v{tax.version} ({tax.id}), unit: {unit}",
    )
    for r in frame.iter_rows(named=True):
        table.add_row(
            *([r["group"]] if by else []),
            r["phase"],
            r["category"] or "",
            r["failure_type"],
            str(r["count"]),
            str(r["total"]),
            f"{100 * r['share']:.1f}",
            f"{100 * r['ci_low']:.1f}–{100 * r['ci_high']:.1f}",
        )
    console.print(table)
    if definitions:
        for t in tax.types:
            console.print(f"[bold]{t.id} {t.name}[/]: {t.definition}", highlight=False)
            if t.examples:
                console.print(f"  e.g. {t.examples[0].insight_id}: {t.examples[0].text}", highlight=False)


@app.command()
def assign(
    taxonomy_id: TaxonomyArg = None,
    threshold: Annotated[
        float | None, typer.Option(help="Least cosine to join a type (default: the taxonomy's own).")
    ] = None,
) -> None:
    """Assign insights not yet in the taxonomy (e.g. a new agent's runs) to its types, or to 'unassigned'."""
    from failatlas.taxonomy.assign import assign_insights

    summary = assign_insights(store(), taxonomy_id, threshold=threshold)
    phases = sorted(set(summary.assigned) | set(summary.unassigned))
    if not phases:
        console.print(f"{summary.taxonomy_id}: no new insights to assign")
    for p in phases:
        console.print(
            f"{summary.taxonomy_id} {p}: {summary.assigned.get(p, 0)} assigned, "
            f"{summary.unassigned.get(p, 0)} unassigned (cosine < {summary.threshold:.2f})"
        )


@app.command()
def export(
    taxonomy_id: TaxonomyArg = None,
    out: Annotated[str, typer.Option("--out", "-o", help="Folder to write into.")] = "taxonomy-export",
    formats: Annotated[
        str | None, typer.Option("--formats", help="Comma-separated, of: " + ",".join(export_formats())
                                 + " (default: all)")
    ] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap draws for the 95% CIs.")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
) -> None:
    """Write the prevalence table (LaTeX booktabs, Markdown, CSV), a types appendix and figures (PNG, PDF)."""
    from failatlas.taxonomy.export import export_taxonomy

    result = export_taxonomy(
        store(create=False),
        taxonomy_id,
        out,
        formats=None if formats is None else [f.strip() for f in formats.split(",") if f.strip()],
        n_boot=n_boot,
        seed=seed,
    )
    for path in result.written:
        console.print(f"wrote {path}", highlight=False)
    for what, why in result.skipped.items():
        console.print(f"skipped {what}: {why}", highlight=False)

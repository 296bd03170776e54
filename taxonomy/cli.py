"""`failatlas taxonomy`: build, list, show, assign and export taxonomy snapshots (a thin layer
over `taxonomy`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from failatlas.core.cli import console, store
from failatlas.core.tables import interval_text
from failatlas.taxonomy.export import export_formats
from failatlas.taxonomy.labelling import LABELLERS
from failatlas.taxonomy.seeding import builtin_seeds

app = typer.Typer(no_args_is_help=True)

TaxonomyArg = Annotated[
    str | None, typer.Argument(help="Taxonomy id or version number (default: the current one).")
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
    seed: Annotated[
        str | None,
        typer.Option(help="Seed taxonomy to map insights onto first: a YAML/JSON file, or a shipped seed ("
                     + ", ".join(builtin_seeds()) + ")."),
    ] = None,
    seed_quantile: Annotated[
        float, typer.Option(help="An insight joins a seed category when its cosine beats this share of the"
                            " corpus' mismatched insight-category pairs.")
    ] = 0.8,
    examples: Annotated[
        list[str] | None,
        typer.Option("--examples", help="Labelled statements to learn the categories from (repeatable): any file or"
                     " folder `ingest file` reads (TRAIL JSONL or annotation folders, JSONL/CSV with text and label)."
                     " Used to train, never stored as insights. Labels that ingested data carries"
                     " (insight_sources.label) are ground truth for evaluation and never train, unless you pass"
                     " that file here."),
    ] = None,
    labels: Annotated[
        bool, typer.Option("--labels/--no-labels", help="Learn from the labels given with `failatlas label`.")
    ] = True,
    label_threshold: Annotated[
        float, typer.Option(help="With examples or labels: least calibrated probability for an insight to join a"
                            " learned category; the rest are clustered into new types.")
    ] = 0.2,
    random_seed: Annotated[int, typer.Option(help="Random seed recorded with the snapshot.")] = 0,
    fit_definitions: Annotated[
        bool, typer.Option(help="Choose each offline or seed definition's representative insights so that names"
                           " reconstruct their types (name fidelity, in-sample); encodes ~13 texts per type with"
                           " the embedding model.")
    ] = False,
) -> None:
    """Build a new taxonomy snapshot from clusterings: name, merge, group into categories, assign members. With
    --seed, insights first join the seed's categories (threshold calibrated per phase, coverage reported); the
    rest are clustered into types marked new. With --examples or stored labels (`failatlas label`), a classifier
    learned from them (and the seed's own texts) assigns insights instead, with calibrated confidence; categories
    take the labels' spelling. Saved edits (rename, merge) are applied again."""
    from pathlib import Path

    from failatlas.taxonomy.build import run
    from failatlas.taxonomy.model import BuildParams
    from failatlas.taxonomy.seeding import load_seed

    params = BuildParams(
        clustering_ids=clustering or None,
        labeller=labeller,
        merge_threshold=merge_threshold,
        assign_threshold=assign_threshold,
        max_categories=max_categories,
        seed=random_seed,
        seed_taxonomy=None if seed is None else load_seed(seed),
        seed_null_quantile=seed_quantile,
        fit_definitions=fit_definitions,
        examples=[str(Path(e).resolve()) for e in examples or []],
        use_labels=labels,
        label_threshold=label_threshold,
    )
    tax = run(store(), params)
    table = Table("id", "category", "name", "n", "origin", "method", title=f"taxonomy v{tax.version} ({tax.id})")
    cats = {c.id: c.name for c in tax.categories}
    for t in tax.types:
        table.add_row(
            t.id, cats.get(t.category_id, ""), t.name, str(t.n_insights), t.origin, t.naming_method
        )
    console.print(table)
    console.print(
        f"{tax.id} (current): {len(tax.types)} failure types in {len(tax.categories)} categories; "
        f"{tax.n_assigned} insights assigned, {tax.n_unassigned} unassigned"
    )
    for r in tax.seed_reports:
        if r.method == "learned":
            console.print(
                f"learned assignment {r.phase}: {r.n_explained}/{r.n_insights} distinct statements"
                f" ({100 * r.coverage:.1f}%) joined a learned category (calibrated probability >= {r.threshold:.2f};"
                f" learned from {r.n_training_rows} labelled statements); "
                f"{sum(t.origin == 'new' and t.phase == r.phase for t in tax.types)} new type(s)", highlight=False)
            continue
        console.print(
            f"seed coverage {r.phase}: {r.n_explained}/{r.n_insights} distinct statements = {100 * r.coverage:.1f}%"
            " explained by the"
            f" seed (cosine >= {r.threshold:.3f}, the {r.null_quantile:.2f} quantile of mismatched pairs); "
            f"{sum(t.origin == 'new' and t.phase == r.phase for t in tax.types)} new type(s)",
            highlight=False,
        )
    for note in tax.edit_notes:
        console.print(note, highlight=False)
    for effect in tax.label_effects:
        console.print(effect.describe(), highlight=False)
    if fit_definitions:
        _print_fitted(tax.id)
    fallbacks = sum(x.naming_method == "offline-after-llm-error" for x in (*tax.types, *tax.categories))
    if fallbacks:  # the LLM labeller's replies were unusable there: say so, the table alone hides it
        console.print(f"[yellow]{fallbacks} name(s) fell back to offline naming after an LLM error[/] "
                      "(their raw_reply says why; building again asks the endpoint again)", highlight=False)


def _print_fitted(taxonomy_id: str) -> None:
    """What --fit-definitions did, from the build's stage run: name fidelity before and after per phase (measured
    on the taxonomy's own insights), or why the definitions stayed as labelled."""
    import json

    rows = store(create=False).query("SELECT summary FROM stage_runs WHERE id = ?", [f"taxonomy.build:{taxonomy_id}"])
    summary = json.loads(rows[0][0]) if rows and rows[0][0] else {}
    if not summary.get("definitions_fitted"):
        reason = summary.get("definitions_not_fitted_because", "nothing to fit")
        console.print(f"definitions not fitted: {reason}", highlight=False, soft_wrap=True, markup=False)
        return
    for phase, r in (summary.get("name_fidelity_before_after") or {}).items():
        console.print(f"definitions fitted, {phase}: name fidelity {r['before']:.3f} -> {r['after']:.3f} (in-sample,"
                      " on this taxonomy's own insights)", highlight=False, markup=False)


@app.command(name="list")
def list_() -> None:
    """List taxonomy snapshots, the current one first (marked *): the one `show`, `export` and the app open by
    default."""
    from failatlas.core.cli import compact_table, fit_columns
    from failatlas.taxonomy.read import list_taxonomies

    frame = list_taxonomies(store(create=False))
    table = compact_table("version", "id", "created", "types", "categories", "insights", "embed model")
    for r in frame.iter_rows(named=True):
        table.add_row(
            f"{r['version']}{'*' if r['current'] else ''}",
            r["id"],
            str(r["created_at"])[:19],
            str(r["n_types"]),
            str(r["n_categories"]),
            str(r["n_insights"]),
            r["embed_model"],
        )
    console.print(fit_columns(table))  # at 80 columns a boxed table cut the id and the model with "…" (issue 42)


@app.command()
def show(
    taxonomy_id: TaxonomyArg = None,
    by: Annotated[str | None, typer.Option(help="Break down by agent, model or benchmark.")] = None,
    unit: Annotated[str, typer.Option(help="Count insights, or runs / tasks affected.")] = "insights",
    definitions: Annotated[
        bool, typer.Option(help="Also print each type's definition, an example and its objects.")
    ] = False,
    quality: Annotated[
        bool, typer.Option(help="Also print name fidelity, seed coverage and, where insights carry labels, the"
                           " accuracy of the seed assignment (per category precision and recall; cross-validated"
                           " over your `failatlas label` labels) and ARI / NMI / per-label recall of the types;"
                           " every figure in distinct statements (loads the embedding model).")
    ] = False,
) -> None:
    """Show a taxonomy's failure types with prevalence (counts, shares, 95% CIs)."""
    from failatlas.taxonomy.prevalence import prevalence
    from failatlas.taxonomy.read import load_taxonomy

    s = store(create=False)
    tax = load_taxonomy(s, taxonomy_id)
    frame = prevalence(s, tax.id, by=by, unit=unit)  # type: ignore[arg-type]
    for table in prevalence_tables(frame, by, f"taxonomy v{tax.version} ({tax.id}), unit: {unit}", console.width):
        console.print(table)
    if definitions:
        from failatlas.taxonomy.facets import objects_of, objects_text

        objects = objects_of(s, tax.id)
        for t in tax.types:
            console.print(f"[bold]{t.id} {t.name}[/]: {t.definition}", highlight=False)
            if objects.get(t.id):
                console.print(f"  objects (occurrences): {objects_text(objects[t.id])}", highlight=False,
                              markup=False)
            if t.examples:
                console.print(f"  e.g. {t.examples[0].insight_id}: {t.examples[0].text}", highlight=False)
    if quality:
        _print_quality(s, tax.id)


def prevalence_tables(frame: object, by: str | None, title: str, width: int) -> list[Table]:
    """`taxonomy show`'s tables; no name is ever cut (long names wrap at spaces). With --by: one row per failure
    type and one column per group (share % over its 95% CI) where that fits `width`, else one table per group,
    titled with the group's name."""
    from failatlas.core.cli import compact_table, fit_columns, fits

    rows = list(frame.iter_rows(named=True))  # type: ignore[attr-defined]

    def long_table(group_rows: list[dict], group_title: str) -> Table:
        table = compact_table("phase", "category", "failure type", "count/total", "share %", "95% CI %",
                              title=group_title)
        for r in group_rows:
            table.add_row(r["phase"], r["category"] or "", r["failure_type"], f"{r['count']}/{r['total']}",
                          f"{100 * r['share']:.1f}", interval_text(r["ci_low"], r["ci_high"]))
        return fit_columns(table, width)

    if not by:
        return [long_table(rows, title)]
    groups = list(dict.fromkeys(r["group"] for r in rows))
    types = list(dict.fromkeys((r["phase"], r["category"] or "", r["failure_type"]) for r in rows))
    cell = {(r["group"], r["phase"], r["category"] or "", r["failure_type"]): r for r in rows}
    wide = compact_table("phase", "category", "failure type", *groups,
                         title=f"{title}; per {by}: share % of its total, 95% CI below")
    for key in types:
        values = []
        for g in groups:
            r = cell.get((g, *key))
            ci = "" if r is None else interval_text(r["ci_low"], r["ci_high"])
            values.append("·" if r is None else f"{100 * r['share']:.1f} ({r['count']}/{r['total']})\n{ci}")
        wide.add_row(*key, *values)
    if fits(wide, width):
        return [fit_columns(wide, width)]
    return [long_table([r for r in rows if r["group"] == g], f"{title}; {by} {g}") for g in groups]


def _print_quality(s: object, taxonomy_id: str) -> None:
    from failatlas.taxonomy.evaluate import evaluate_taxonomy

    m = evaluate_taxonomy(s, taxonomy_id)  # type: ignore[arg-type]
    summary = Table("metric", "value", "unit", title=f"quality of {taxonomy_id}")
    summary.add_row("name fidelity", f"{m['name_fidelity']:.3f}", f"share of {m.get('fidelity_items', 0)} distinct"
                    " statements landing in the type their names point to")
    for phase, c in m["coverage"].items():
        summary.add_row(f"seed coverage ({phase})", f"{100 * c['coverage']:.1f}%",
                        f"of {c['n_insights']} distinct statements (threshold {c['threshold']:.3f})")
    acc = m.get("seed_accuracy")
    if acc:
        summary.add_row("seed assignment accuracy", "-" if acc["accuracy"] is None else f"{acc['accuracy']:.3f}",
                        f"share of the {acc['n_covered']} distinct statements in seed categories whose imported"
                        f" label is that category; evaluation set: {acc['evaluation']}")
        summary.add_row("seed accuracy, all labelled", f"{acc['accuracy_all']:.3f}",
                        f"share of all {acc['n_labelled']} labelled distinct statements")
    cv = m.get("label_cv")
    if cv:
        from failatlas.taxonomy.labels import count_unmatched

        away = count_unmatched(s)  # type: ignore[arg-type]
        summary.add_row("your labels, cross-validated accuracy", f"{cv['accuracy']:.3f}",
                        f"{cv['folds']}-fold over {cv['n_labels']} labelled distinct statements"
                        + (f", {away} of them not in this store (`failatlas label list`)" if away else ""))
    labels = m.get("labels")
    if labels:
        for key in ("n_items", "n_labels", "n_clusters", "ari", "nmi", "homogeneity", "completeness", "purity",
                    "macro_recall"):
            value = labels[key]
            unit = "distinct statements" if key == "n_items" else "over distinct statements"
            summary.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value),
                            "" if key in ("n_labels", "n_clusters") else unit)
    else:
        summary.add_row("human labels", "none in insight_sources.label: ARI / NMI not scored", "")
    if not acc and not cv:
        summary.add_row("seed assignment accuracy", "not scored", _no_seed_accuracy(bool(m["coverage"]), labels))
    console.print(summary)
    for title, block in (("imported labels", acc), ("your labels, cross-validated", cv)):
        if not block:
            continue
        table = Table("category", "assigned", "labelled", "precision", "recall",
                      title=f"per category, {title} (distinct statements)")
        for name, r in block["per_category"].items():
            table.add_row(name, str(r["assigned"]), str(r["labelled"]),
                          *("-" if r[k] is None else f"{r[k]:.2f}" for k in ("precision", "recall")))
        console.print(table)
    if labels:
        recall = Table("label", "items", "recall", title="per-label recall (share of the label's distinct statements"
                       " in its best type)")
        for name, value in sorted(labels["per_label_recall"].items(), key=lambda kv: -labels["label_sizes"][kv[0]]):
            recall.add_row(name, str(labels["label_sizes"][name]), f"{value:.2f}")
        console.print(recall)


def _no_seed_accuracy(seeded: bool, labels: dict | None) -> str:
    """Why `taxonomy show --quality` scores no seed assignment, and what it computed instead (issue 42: an
    unsupervised build said "no labels to compare with" beside an ARI computed from those labels)."""
    if not seeded:
        compared = (f"; the types are compared with the imported labels of {labels['n_items']} distinct statements"
                    f" (insight_sources.{labels['column']}) by ARI / NMI above" if labels
                    else ", and no labels to compare the types with")
        return f"built without --seed: no seed category to check{compared}"
    return ("no labels to compare with: coverage alone says nothing about whether the assigned categories are"
            " right")


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
                                 + " (default: all); with --type, of md,csv,json")
    ] = None,
    failure_type: Annotated[str | None, typer.Option(
        "--type", help="A failure type's id (e.g. implementation/T03, or unassigned): write its drill-down instead "
        "(each insight, the runs it was stated in with their verdicts and evidence lines) as "
        "drilldown-<type>.md, .csv and .json, the files the app's Drill-down page downloads.")] = None,
) -> None:
    """Write the prevalence table (LaTeX booktabs, Markdown, CSV), a types appendix and figures (PNG, PDF); with
    --type, one failure type's drill-down."""
    from failatlas.taxonomy.export import export_taxonomy

    chosen = None if formats is None else [f.strip() for f in formats.split(",") if f.strip()]
    if failure_type is not None:
        from failatlas.taxonomy.drilldown import DRILLDOWN_FORMATS, export_drilldown

        for path in export_drilldown(store(create=False), failure_type, taxonomy_id, out,
                                     formats=tuple(chosen or DRILLDOWN_FORMATS)):
            console.print(f"wrote {path}", highlight=False)
        return
    result = export_taxonomy(
        store(create=False),
        taxonomy_id,
        out,
        formats=chosen,
    )
    for path in result.written:
        console.print(f"wrote {path}", highlight=False)
    for what, why in result.skipped.items():
        console.print(f"skipped {what}: {why}", highlight=False)


TaxonomyOption = Annotated[
    str | None, typer.Option("--taxonomy", "-t", help="Taxonomy id or version (default: the current one).")
]


def _edit(action: str, type_ids: list[str], args: dict, taxonomy_id: str | None) -> None:
    from failatlas.taxonomy.edits import edit_taxonomy

    edit, types = edit_taxonomy(store(), action, type_ids, args, taxonomy_id)
    touched = [t for t in types if t.naming_method == "edited" and t.phase == edit.phase]
    for t in touched:
        console.print(f"{edit.made_on} {t.id}: {t.name} ({t.n_insights} insights)", highlight=False)
    console.print(f"saved as edit {edit.id}: later `taxonomy build` runs apply it to the types holding most of"
                  " the same insights", highlight=False)


@app.command()
def rename(
    type_id: Annotated[str, typer.Argument(help="Failure type id, e.g. implementation/T03.")],
    name: Annotated[str, typer.Argument(help="The new name.")],
    definition: Annotated[str | None, typer.Option(help="A new definition too.")] = None,
    taxonomy_id: TaxonomyOption = None,
) -> None:
    """Rename a failure type (and optionally redefine it); kept across rebuilds."""
    _edit("rename", [type_id], {"name": name, **({"definition": definition} if definition else {})}, taxonomy_id)


@app.command()
def merge(
    type_ids: Annotated[list[str], typer.Argument(help="Two or more type ids of one phase; the first is kept.")],
    name: Annotated[str | None, typer.Option(help="Name of the merged type (default: the first's).")] = None,
    taxonomy_id: TaxonomyOption = None,
) -> None:
    """Merge failure types of one phase into the first; kept across rebuilds."""
    _edit("merge", type_ids, {"name": name} if name else {}, taxonomy_id)


@app.command()
def split(
    type_id: Annotated[str, typer.Argument(help="Failure type id to split.")],
    k: Annotated[int, typer.Option(help="Number of parts (k-means over the members' vectors).")] = 2,
    taxonomy_id: TaxonomyOption = None,
) -> None:
    """Split a failure type into k parts, each named from its insights; kept across rebuilds."""
    _edit("split", [type_id], {"k": k}, taxonomy_id)

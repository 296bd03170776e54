"""`failatlas cluster`: cluster insights, list clusterings, evaluate them against human labels."""

from __future__ import annotations

import difflib
from typing import Annotated

import typer
from rich.table import Column, Table

from failatlas.cluster.components import CLUSTERERS, REDUCERS
from failatlas.core.cli import compact_table, console, fit_columns, store

app = typer.Typer(no_args_is_help=True)


def _print(table: Table) -> None:
    """A table laid out on the terminal's columns by `fit_columns`: headers and cells wrap at spaces, no id or
    number is cut (issue 42: at 80 columns `cluster run` printed "insig… clust…")."""
    console.print(fit_columns(table))


@app.command("run")
def run(
    phase: Annotated[
        str | None, typer.Option(help="Cluster this phase only (default: each phase in turn).")
    ] = None,
    all_phases: Annotated[bool, typer.Option("--all-phases", help="Cluster all insights together.")] = False,
    seed: Annotated[int, typer.Option(help="Random seed for every stochastic step.")] = 42,
    model: Annotated[
        str, typer.Option(help="Embedding model whose cached vectors to use.")
    ] = "all-MiniLM-L6-v2",
    normalise: Annotated[
        bool, typer.Option("--normalise/--no-normalise", help="Use vectors of masked texts.")
    ] = False,
    reducer: Annotated[str, typer.Option(help="One of: " + ", ".join(REDUCERS.names()) + ".")] = "umap",
    clusterer: Annotated[
        str, typer.Option(help="One of: " + ", ".join(CLUSTERERS.names()) + ".")
    ] = "hdbscan",
    n_neighbors: Annotated[int | None, typer.Option(help="UMAP neighbours (default: adapts to N).")] = None,
    n_components: Annotated[int | None, typer.Option(help="Reduced dimensions (default: 10).")] = None,
    init: Annotated[
        str | None, typer.Option(help="UMAP's start: spectral, pca, tswspectral or random (default: pca from 10k).")
    ] = None,
    min_cluster_size: Annotated[
        int | None, typer.Option(help="HDBSCAN's smallest cluster (default: 2/3 sqrt(N)).")
    ] = None,
    min_samples: Annotated[
        int | None, typer.Option(help="HDBSCAN's min_samples (default: half the above).")
    ] = None,
    selection: Annotated[str, typer.Option(help="HDBSCAN cluster selection: leaf or eom.")] = "leaf",
    n_clusters: Annotated[int | None, typer.Option(help="Cluster count for kmeans / agglomerative.")] = None,
    reassign_outliers: Annotated[
        bool, typer.Option("--reassign-outliers", help="Move outliers to the nearest cluster.")
    ] = False,
    parallel: Annotated[
        bool, typer.Option("--parallel", help="Unseeded multi-threaded UMAP (umap-learn, from 4,096"
                     " insights): faster at scale, not reproducible. Below 4,096 UMAP runs in numpy on one core"
                     " either way, and this only drops the seed.")
    ] = False,
    stability_runs: Annotated[
        int, typer.Option(help="Re-runs (other seed / resample) for the stability ARI.")
    ] = 2,
    no_map: Annotated[bool, typer.Option("--no-map", help="Skip the 2-D projection.")] = False,
    reuse: Annotated[
        bool,
        typer.Option(
            "--reuse-reductions/--no-reuse-reductions",
            help="Read seeded UMAP results cached in the store for the same vectors and parameters.",
        ),
    ] = True,
) -> None:
    """Cluster insights (per phase by default) from their cached embeddings and store the result."""
    from pydantic import ValidationError

    from failatlas.cluster.params import ClusterParams
    from failatlas.cluster.stage import run as run_cluster
    from failatlas.core.errors import ConfigError
    from failatlas.ingest.model import PHASES

    if phase is not None and phase not in PHASES:  # else "no insights in phase 'implmentation'" hides the typo
        close = difflib.get_close_matches(phase, PHASES, n=1)
        raise ConfigError(f"unknown phase '{phase}'" + (f" (did you mean '{close[0]}'?)" if close else ""),
                          hint="phases: " + ", ".join(PHASES))
    try:
        params = ClusterParams(
            phase=phase,
            all_phases=all_phases,
            seed=seed,
            embed_model=model,
            normalise="mask" if normalise else "none",
            reducer=reducer,
            clusterer=clusterer,
            n_neighbors=n_neighbors,
            n_components=n_components,
            init=init,
            min_cluster_size=min_cluster_size,
            min_samples=min_samples,
            cluster_selection_method=selection,
            n_clusters=n_clusters,
            reassign_outliers=reassign_outliers,
            parallel=parallel,
            stability_runs=stability_runs,
            map_2d=not no_map,
            reuse_reductions=reuse,
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid clustering option: {problems}") from None
    results = _run_with_progress(store(), params, run_cluster)
    table = compact_table("clustering", "phase", "insights", "clusters", "outliers", "stability ARI", "seconds")
    for r in results:
        table.add_row(
            r.id,
            r.phase or "(all)",
            str(r.n_insights),
            str(r.n_clusters),
            f"{r.outlier_rate:.1%}" + (f" ({r.n_reassigned} reassigned)" if r.n_reassigned else ""),
            "-" if r.stability_ari is None else f"{r.stability_ari:.3f}",
            f"{r.seconds:.1f}",
        )
    _print(table)
    for r in results:
        reused = f"; {r.reductions_reused} UMAP reduction(s) reused" if r.reductions_reused else ""
        console.print(f"stored clustering {r.id} ({r.phase or 'all phases'}{reused})", soft_wrap=True)


def _run_with_progress(s, params, run_cluster) -> list:  # noqa: ANN001
    """The clustering, one phase after the other, under a progress bar: phases done of all, and an estimate of
    the time left weighted by each phase's insights (UMAP's time grows with them). Each phase is one call of the
    stage, so a phase finished is stored even when a later one is interrupted."""
    from failatlas.cluster.stage import phases_present
    from failatlas.core.cli import live_progress

    quiet_hugging_face()
    # with no insights at all, [None]: the stage says so
    phases = [params.phase] if params.phase is not None or params.all_phases else phases_present(s) or [None]
    counts = dict(s.query("SELECT phase, count(*) FROM insights GROUP BY phase"))
    weight = {p: max(int(counts.get(p, 0) if p else sum(counts.values())), 1) for p in phases}
    results = []
    with live_progress(f"clustering {len(phases)} phase(s)", sum(weight.values())) as progress:
        for k, phase in enumerate(phases, start=1):
            progress.describe(f"phase {k}/{len(phases)}: {phase or 'all'} ({weight[phase]:,} insights)")
            update = {"phase": phase} if phase is not None and params.phase is None else {}
            done = run_cluster(s, params.model_copy(update=update)).clusterings
            results += done
            progress.advance(weight[phase])
            for r in done:
                progress.say(f"{r.phase or 'all phases'}: {r.n_clusters} clusters, {r.outlier_rate:.0%} outliers, "
                             f"{r.seconds:.0f} s")
    return results


def quiet_hugging_face() -> None:
    """Keep Hugging Face's own bars ("Loading weights", downloads) out of ours: they would interleave with it."""
    import os
    import sys

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read by huggingface_hub and transformers at import
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "transformers" in sys.modules:  # imported already: tell it directly
        sys.modules["transformers"].utils.logging.disable_progress_bar()


@app.command("list")
def list_() -> None:
    """List clusterings, newest first."""
    from failatlas.cluster.finish import pending
    from failatlas.cluster.stage import list_clusterings

    db = store(create=False)
    todo = pending(db)
    rows = list_clusterings(db)
    models = sorted({r["embed_model"] for r in rows})
    # one model (the usual case) is said in the title: its column would leave no room at 80 columns
    table = compact_table("clustering", "phase", *(["model"] if len(models) > 1 else []), "insights", "clusters",
                          "outliers", "stability ARI", "created",
                          title=f"embedding model {models[0]}" if len(models) == 1 else None)
    for r in rows:
        table.add_row(
            r["id"],
            r["phase"] or "(all)",
            *([r["embed_model"]] if len(models) > 1 else []),
            str(r["n_insights"]),
            str(r["n_clusters"]),
            f"{r['outlier_rate']:.1%}",
            ("pending" if "stability" in todo.get(r["id"], []) else "-") if r["stability_ari"] is None
            else f"{r['stability_ari']:.3f}",
            str(r["created_at"])[:16],
        )
    _print(table)
    if todo:
        console.print(f"{len(todo)} clustering(s) without their map or stability scores yet:"
                      " `failatlas cluster finish` computes them (the app computes a missing map itself)",
                      soft_wrap=True)


@app.command("finish")
def finish(
    clustering: Annotated[
        list[str] | None, typer.Option(help="Clustering id (repeatable; default: every one with something pending).")
    ] = None,
    no_map: Annotated[bool, typer.Option("--no-map", help="Leave the 2-D map pending.")] = False,
    no_stability: Annotated[bool, typer.Option("--no-stability", help="Leave the stability scores pending.")] = False,
) -> None:
    """Compute what `cluster run` left for later: the 2-D map and the stability re-runs (same seeds, same result)."""
    from failatlas.cluster.finish import FinishParams
    from failatlas.cluster.finish import finish as finish_clusterings

    result = finish_clusterings(store(create=False), FinishParams(
        clustering_ids=clustering or None, map_2d=not no_map, stability=not no_stability))
    if not result.clusterings:
        console.print("nothing pending: every clustering has its map and stability scores")
        return
    table = compact_table("clustering", "computed", "stability ARI", "seconds")
    for r in result.clusterings:
        table.add_row(r.id, ", ".join(r.computed), "-" if r.stability_ari is None else f"{r.stability_ari:.3f}",
                      f"{r.seconds:.1f}")
    _print(table)


@app.command("evaluate")
def evaluate(
    clustering: Annotated[str | None, typer.Option(help="Clustering id (default: the newest).")] = None,
    labels: Annotated[str, typer.Option(help="insight_sources column holding the human labels.")] = "label",
) -> None:
    """Score a clustering against human labels: ARI, NMI, homogeneity, completeness, purity, recall."""
    from failatlas.cluster.stage import evaluate_clustering

    m = evaluate_clustering(store(create=False), clustering, labels)
    summary = Table("metric", "value", title=f"{m['clustering_id']} vs insight_sources.{labels}; unit: distinct"
                    " statements (insights, majority label each), not occurrences")
    for key in (
        "n_items",
        "n_labels",
        "n_clusters",
        "ari",
        "nmi",
        "homogeneity",
        "completeness",
        "purity",
        "outlier_rate",
        "macro_recall",
    ):
        value = m[key]
        summary.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(summary)
    recall = Table(
        Column("label", no_wrap=True, min_width=32),
        "statements",
        "recall",
        title="per-label recall (share of the label's distinct statements in its best cluster)",
    )
    for name, value in sorted(m["per_label_recall"].items(), key=lambda kv: -m["label_sizes"][kv[0]]):
        recall.add_row(name, str(m["label_sizes"][name]), f"{value:.2f}")
    console.print(recall)

"""`failatlas embed`: embed insights (cached by content)."""

from __future__ import annotations

from typing import Annotated

import typer

from failatlas.core.cli import console, progress_bar, store

app = typer.Typer(no_args_is_help=True)


@app.command("run")
def run(
    model: Annotated[
        str, typer.Option(help="Model name, folder, or locally cached hub name.")
    ] = "all-MiniLM-L6-v2",
    normalise: Annotated[
        bool,
        typer.Option(
            "--normalise/--no-normalise", help="Mask numbers, paths, identifiers and quoted values."
        ),
    ] = False,
    batch_size: Annotated[
        int | None, typer.Option(help="Texts per forward pass [default: 64 on the CPU, 1024 on a GPU].")
    ] = None,
    phase: Annotated[list[str] | None, typer.Option(help="Only insights of this phase (repeatable).")] = None,
    device: Annotated[str | None, typer.Option(help="cuda, cpu, ... [default: cuda when present]")] = None,
) -> None:
    """Embed every insight whose text has no cached vector for this model yet."""
    from contextlib import ExitStack

    from failatlas.embed.stage import embed_insights

    with ExitStack() as stack:
        report = embed_insights(
            store(),
            model=model,
            normalise="mask" if normalise else "none",
            batch_size=batch_size,
            phases=phase or None,
            device=device,
            progress=lambda total: stack.enter_context(progress_bar("embedding", total)),
        )
    console.print(
        f"{report.n_insights} insights, {report.n_texts} distinct texts: {report.n_new} embedded, "
        f"{report.n_cached} cached ({report.model}, {report.revision}, {report.normalisation}, "
        f"{report.device or 'model not loaded'}, {report.seconds:.1f} s)"
    )

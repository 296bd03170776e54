"""`failatlas embed`: embed insights (cached by content, in the embedding set of the model)."""

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
        int | None, typer.Option(help="Texts per forward pass (default: 64 on the CPU, 1024 on a GPU).")
    ] = None,
    phase: Annotated[list[str] | None, typer.Option(help="Only insights of this phase (repeatable).")] = None,
    device: Annotated[str | None, typer.Option(help="cuda, cpu, ... (default: cuda when present)")] = None,
) -> None:
    """Embed every insight whose text has no cached vector for this model yet."""
    from contextlib import ExitStack

    from failatlas.embed.stage import EmbedParams
    from failatlas.embed.stage import run as run_embed

    params = EmbedParams(model=model, normalise="mask" if normalise else "none", batch_size=batch_size,
                         phases=phase or None, device=device)
    with ExitStack() as stack:
        result = run_embed(store(), params,
                           progress=lambda total: stack.enter_context(progress_bar("embedding", total)))
    console.print(
        f"{result.n_insights} insights, {result.n_texts} distinct texts: {result.n_new} embedded, "
        f"{result.n_cached} cached ({result.model}, {result.revision}, {result.normalisation}, "
        f"{result.device or 'model not loaded'}, {result.seconds:.1f} s; set {result.embedding_set_id})",
        soft_wrap=True,
    )

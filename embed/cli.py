"""`failatlas embed`: embed insights (cached by content, in the embedding set of the model)."""

from __future__ import annotations

from typing import Annotated

import typer

from failatlas.core.cli import console, err_console, progress_bar, store

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


@app.command("tune")
def tune(
    folder: Annotated[str, typer.Argument(help="Folder to write the tuned model into (new, or one tune wrote).")],
    base: Annotated[str, typer.Option(help="Model to start from (as `embed run --model`).")] = "all-MiniLM-L6-v2",
    examples: Annotated[
        list[str] | None,
        typer.Option("--examples", help="Labelled statements to tune on besides the stored labels (repeatable):"
                     " any file or folder `ingest file` reads. Labels imported data carries are ground truth for"
                     " evaluation and never train, unless you pass that file here."),
    ] = None,
    labels: Annotated[
        bool, typer.Option("--labels/--no-labels", help="Tune on the labels stored by `failatlas label`.")
    ] = True,
    epochs: Annotated[int, typer.Option(help="Passes over the labelled statements (1-20).")] = 3,
    max_steps: Annotated[
        int, typer.Option(help="At most this many optimiser steps (1-2000; one takes seconds on a CPU).")
    ] = 60,
    batch_size: Annotated[int, typer.Option(help="Statements per step (class-balanced).")] = 32,
    learning_rate: Annotated[float, typer.Option(help="AdamW learning rate.")] = 2e-5,
    seed: Annotated[int, typer.Option(help="Seed of the batches and the model's initial state.")] = 0,
    device: Annotated[str | None, typer.Option(help="cuda, cpu, ... (default: cuda when present)")] = None,
) -> None:
    """Fine-tune the embedding model on your labels (and --examples) into FOLDER, a model of its own: then
    `failatlas embed run --model FOLDER` makes its embedding set. FOLDER/failatlas_tune.json records the base
    model and revision, the labels used (count and hash), loss, epochs, seed, time and package versions; the
    embedding set keeps the same record. Written all or nothing (Ctrl-C leaves no folder)."""
    from pathlib import Path

    from failatlas.embed.tune import TuneParams
    from failatlas.embed.tune import tune as run_tune

    params = TuneParams(folder=folder, base_model=base, examples=[str(Path(e).resolve()) for e in examples or []],
                        use_labels=labels, epochs=epochs, max_steps=max_steps, batch_size=batch_size,
                        learning_rate=learning_rate, seed=seed, device=device)
    every = max(1, max_steps // 20)

    def progress(step: int, steps: int, loss: float) -> None:
        if step == 1 or step == steps or step % every == 0:
            err_console.print(f"step {step}/{steps}: loss {loss:.4f}", highlight=False)

    result = run_tune(store(), params, progress=progress)
    console.print(
        f"tuned {result.base_model} ({result.base_revision}) on {result.n_statements} labelled statements in"
        f" {result.n_categories} categories (labels {result.labels_hash}): {result.steps} steps, loss"
        f" {result.loss_first:.3f} -> {result.loss_last:.3f}, {result.seconds:.0f} s; wrote {result.folder}"
        f" ({result.revision}). Next: failatlas embed run --model {result.folder}",
        soft_wrap=True, highlight=False,
    )

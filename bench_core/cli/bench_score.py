"""`failatlas bench score`: score stored runs, a line per run as it is done (thin: parse, Params, run, print);
registered on the `bench` group by `bench.py`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from failatlas.bench_core.cli.lines import score_line
from failatlas.bench_core.sandbox import resolve_sandbox_kind
from failatlas.bench_core.scoring import JUDGES, ScoreParams
from failatlas.bench_core.scoring import run as score_run
from failatlas.bench_core.scoring.stage import ScoredRun
from failatlas.core.cli import console, live_progress, store


def score(
    run: Annotated[list[str] | None, typer.Option("--run", help="Run id (repeatable); default: unscored runs")] = None,
    rescore: Annotated[bool, typer.Option(help="Score again runs that already have scores.")] = False,
    sandbox: Annotated[str | None, typer.Option(
        help="Sandbox kind for the clean re-run and hidden tests (default: the kind each run ran in; auto: docker "
        "where its engine answers, else bwrap).")] = None,
    image: Annotated[str | None, typer.Option(help="Sandbox image for the re-run.")] = None,
    repo: Annotated[Path | None, typer.Option(
        help="Checkout to re-run every selected run's task from (default: each task's repository from the cache "
        "(`failatlas repos add`), else its bundled one).")] = None,
    runs_dir: Annotated[Path | None, typer.Option(help="Scratch folder (default: runs/ beside the store).")] = None,
    samples: Annotated[int, typer.Option(help="LLM judge samples per verdict (majority vote).")] = 1,
    judge: Annotated[list[str] | None, typer.Option(
        "--judge", help="Judge name (repeatable): " + ", ".join(JUDGES.names()) + "; default: all.")] = None,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Ask the LLM endpoints again instead of replaying cached replies.")] = False,
    workers: Annotated[int, typer.Option(
        help="Runs judged at once (each in sandboxes of its own; this process alone writes the store).")] = 1,
) -> None:
    """Score runs: monitor, execution validator (clean re-run) and judges (offline, plus LLM when configured).
    A run with nothing to compare is `not_scored` (E "–"); one whose repository is unavailable, or whose task
    cannot be prepared from it, is listed and left unscored."""
    s = store()
    sandbox = resolve_sandbox_kind(sandbox, say=console.print) if sandbox else None
    params = ScoreParams(run_ids=run or None, rescore=rescore, sandbox=sandbox, image=image, repo=repo,
                         runs_dir=runs_dir, samples=samples, workers=workers,
                         judges=judge or None)
    if no_cache:
        from failatlas.core.llm import NO_CACHE_ENV

        os.environ[NO_CACHE_ENV] = "1"  # read by every LLM role's client this process makes
    with live_progress("scoring", None) as progress:
        def done(scored: ScoredRun) -> None:
            progress.advance()
            progress.say(score_line(scored))

        result = score_run(s, params, on_done=done, on_plan=progress.total,
                           on_wait=lambda text: progress.say(f"[yellow]{escape(text)}[/]"))
    outcomes = ", ".join(f"{k}: {v}" for k, v in sorted(result.outcomes.items())) or "nothing to score"
    console.print(f"{result.scored} run(s) scored ({outcomes})")
    _print_judge_counts(s, result.run_ids)
    for line in result.unavailable:
        console.print(f"[yellow]not scored:[/] {escape(line)}", highlight=False)
    for line in result.infra_errors:
        console.print(f"[yellow]infrastructure error, not scored:[/] {escape(line)}", highlight=False)
    for line in result.failed:
        console.print(f"[red]scoring failed (recorded; a plain re-score retries it):[/] {escape(line)}",
                      highlight=False)
    if result.failed or result.infra_errors:  # everything else was scored first
        raise typer.Exit(1)


def _print_judge_counts(s, run_ids: list[str]) -> None:  # noqa: ANN001
    """Per judge: verdicts, failures and not-run counts of the runs just scored; LLM/deterministic disagreements."""
    from failatlas.bench_core.scoring.checks.base import disagreements, judge_counts

    failed_any = False
    for name, by_status in judge_counts(s, run_ids).items():
        parts = ", ".join(f"{status} {n}" for status, n in sorted(by_status.items()))
        failed = by_status.get("judge_failed", 0)
        failed_any = failed_any or bool(failed)
        colour = "red" if failed else "default"
        console.print(f"  [{colour}]{escape(name)}[/]: {escape(parts)}", highlight=False, soft_wrap=True)
    if failed_any:
        console.print("[yellow]some judgements failed[/] (`bench show RUN` says why); run `failatlas bench score` "
                      "again to retry them", highlight=False, soft_wrap=True)
    for line in disagreements(s, run_ids):
        console.print(f"[yellow]disagreement:[/] {escape(line)}", highlight=False, soft_wrap=True)

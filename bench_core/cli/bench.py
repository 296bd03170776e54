"""`failatlas bench`: run agents on tasks, score, report, list and show runs (thin: parse, Params, run, print)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from failatlas.bench_core.agents import Budget, agent_names, create_agent
from failatlas.bench_core.runs import BenchParams, BenchResult, ResourceOverrides, get_run, list_runs, total_runs
from failatlas.bench_core.runs import run as bench_run
from failatlas.bench_core.sandbox import SANDBOXES
from failatlas.bench_core.scoring import JUDGES, ScoreParams
from failatlas.bench_core.scoring import run as score_run
from failatlas.core.cli import console, progress_bar, store
from failatlas.core.errors import ConfigError

app = typer.Typer(no_args_is_help=True)


def _params(pairs: list[str]) -> dict:
    params = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--param '{pair}' is not KEY=VALUE")
        key, value = pair.split("=", 1)
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params


@app.command()
def run(
    agent: Annotated[str, typer.Option(help="Agent name: " + ", ".join(agent_names()))],
    task: Annotated[list[str] | None, typer.Option("--task", help="Task id (repeatable); default: all")] = None,
    benchmark: Annotated[str | None, typer.Option(help="Only tasks of this benchmark.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only tasks of this kind (T1, masked_functions, ...).")] = None,
    model: Annotated[str, typer.Option(help="Model name for LLM agents (part of the run key).")] = "",
    attempts: Annotated[int, typer.Option(help="Attempts per task (for pass@k).")] = 1,
    workers: Annotated[int, typer.Option(help="Parallel runs.")] = 1,
    sandbox: Annotated[str, typer.Option(help="Sandbox kind: " + ", ".join(SANDBOXES.names()) + ".")] = "docker",
    executor: Annotated[str, typer.Option(help="local (process pool) or ray (a Ray cluster).")] = "local",
    param: Annotated[list[str] | None, typer.Option(help="Agent parameter KEY=VALUE (repeatable).")] = None,
    gpu_tasks: Annotated[bool, typer.Option(
        help="Run tasks that need more GPUs than this host has anyway, with no GPU visible (default: such a task "
        "is not run, and the reason is printed).")] = False,
    retry_infra: Annotated[bool, typer.Option(
        help="Redo every stored infra_error run (those whose inputs changed are redone without it).")] = False,
    runs_dir: Annotated[Path | None, typer.Option(help="Workspaces folder [default: runs/ beside the store].")] = None,
    image: Annotated[str | None, typer.Option(help="Sandbox image (default: the task's, else the built one).")] = None,
    repo: Annotated[Path | None, typer.Option(
        help="Checkout to prepare every selected task from [default: each task's repository from the cache "
        "(`failatlas repos add`), else its bundled one].")] = None,
    setting: Annotated[str | None, typer.Option(
        help="The task setting to give the agent (AutoExperiment: e.g. whether the run command is shown); part "
        "of the run key [default: each task's first].")] = None,
    gpus: Annotated[int | None, typer.Option(help="Override the tasks' GPU count.", min=0)] = None,
    memory: Annotated[float | None, typer.Option(help="Override the tasks' memory, in GB.", min=0.0625)] = None,
    timeout: Annotated[int | None, typer.Option(
        help="Override the tasks' experiment time limit, in seconds.", min=1)] = None,
    max_steps: Annotated[int, typer.Option(help="Agent budget: steps.")] = 50,
    max_seconds: Annotated[float, typer.Option(help="Agent budget: wall-clock seconds.")] = 1800.0,
) -> None:
    """Run an agent on tasks in sandboxes; re-running the same command does only what is missing (and stored
    infra_error runs whose repository, image, resources or budget changed)."""
    s = store()
    params = BenchParams(
        agent=agent, agent_params=_params(param or []), model=model, task_ids=task or None, benchmark=benchmark,
        kind=kind, gpu_tasks=gpu_tasks, attempts=attempts, workers=workers, sandbox=sandbox, executor=executor,
        retry_infra=retry_infra, budget=Budget(max_steps=max_steps, max_seconds=max_seconds), image=image,
        repo=repo, runs_dir=runs_dir, setting=setting,
        resources=ResourceOverrides(gpus=gpus, memory_gb=memory, timeout_s=timeout),
    )
    create_agent(agent, **params.agent_params)  # an unknown agent fails before any progress bar is drawn
    with progress_bar(f"{agent} runs", total_runs(s, params)) as advance:
        result = bench_run(s, params, on_done=lambda _record: advance())
        advance(result.skipped + len(result.not_run) * attempts)
    _print_run_result(result)


def _print_run_result(result: BenchResult) -> None:
    """The batch's summary, then why each task was not run and why each run ended in infra_error."""
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(result.by_status.items())) or "nothing new"
    console.print(f"{result.planned} run(s) executed ({statuses}); {result.skipped} already stored")
    if result.redone:
        console.print(f"{result.redone} infra_error run(s) redone: inputs changed")
    for line in result.not_run:
        console.print(f"[yellow]not run:[/] {escape(line)}", highlight=False)
    for line in result.infra_errors:
        console.print(f"[red]infra_error:[/] {escape(line)}", highlight=False)
    for line in result.kept_infra:
        console.print(f"[yellow]infra_error (stored):[/] {escape(line)}", highlight=False)
    if result.kept_infra:
        console.print(f"{len(result.kept_infra)} stored infra_error run(s) skipped (inputs unchanged); "
                      "redo them with --retry-infra")


@app.command("list")
def list_(
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")] = False,
) -> None:
    """List stored runs (full run ids: `bench show RUN` takes them)."""
    rows = list_runs(store(create=False), agent=agent, task_id=task)
    if as_json:
        console.print_json(json.dumps(rows, default=str))
        return
    table = Table("run", "task", "agent", "model", "att.", "status", "fault", "s")
    # ids are what a user copies into `bench show`: never cut; the task column gives way first
    table.columns[0].no_wrap = True
    table.columns[0].min_width = max([3] + [len(r["id"]) for r in rows])
    for r in rows:
        table.add_row(r["id"], escape(r["task_id"]), r["agent"], escape(r["model"] or "-"), str(r["attempt"]),
                      r["status"], r["fault_injected"] or "", str(r["seconds"]))
    console.print(table)
    console.print(f"{len(rows)} run(s)")


@app.command()
def show(
    run_id: str,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show one run: outputs, agent steps and sandbox commands."""
    run = get_run(store(create=False), run_id)
    if as_json:
        console.print_json(json.dumps(run, default=str))
        return
    outputs = json.loads(run["outputs"]) if isinstance(run["outputs"], str) else run["outputs"]
    console.print(f"[bold]{run['id']}[/] task={run['task_id']} agent={run['agent']} status={run['status']}"
                  f" fault={run['fault_injected'] or '-'}")
    if run["infra_error"]:
        console.print(f"infra error: {run['infra_error']}")
    console.print(f"changed files: {', '.join(outputs.get('changed_files') or []) or '-'}")
    console.print(f"conclusion: {(outputs.get('conclusion') or '-')[:500]}")
    table = Table("seq", "purpose", "command", "exit", "s", "killed")
    for c in run["commands"]:
        table.add_row(str(c["seq"]), c["purpose"], c["command"][:80], str(c["exit_code"]),
                      f"{c['duration_s']:.2f}", c["killed_reason"] or "")
    console.print(table)


@app.command()
def score(
    run: Annotated[list[str] | None, typer.Option("--run", help="Run id (repeatable); default: unscored runs")] = None,
    rescore: Annotated[bool, typer.Option(help="Score again runs that already have scores.")] = False,
    sandbox: Annotated[str, typer.Option(help="Sandbox kind for the validator's clean re-run.")] = "docker",
    image: Annotated[str | None, typer.Option(help="Sandbox image for the re-run.")] = None,
    repo: Annotated[Path | None, typer.Option(
        help="Checkout to re-run every selected run's task from [default: each task's repository from the cache "
        "(`failatlas repos add`), else its bundled one].")] = None,
    runs_dir: Annotated[Path | None, typer.Option(help="Scratch folder [default: runs/ beside the store].")] = None,
    samples: Annotated[int, typer.Option(help="LLM judge samples per verdict (majority vote).")] = 1,
    judge: Annotated[list[str] | None, typer.Option(
        "--judge", help="Judge name (repeatable): " + ", ".join(JUDGES.names()) + "; default: all.")] = None,
) -> None:
    """Score runs: monitor, execution validator (clean re-run) and judges (offline, plus LLM when configured).
    A run with nothing to compare is `not_scored` (E "–"); one whose repository is unavailable, or whose task
    cannot be prepared from it, is listed and left unscored."""
    s = store()
    params = ScoreParams(run_ids=run or None, rescore=rescore, sandbox=sandbox, image=image, repo=repo,
                         runs_dir=runs_dir, samples=samples,
                         judges=judge or None)
    with progress_bar("scoring", len(run) if run else None) as advance:
        result = score_run(s, params, on_done=lambda _rid: advance())
    outcomes = ", ".join(f"{k}: {v}" for k, v in sorted(result.outcomes.items())) or "nothing to score"
    console.print(f"{result.scored} run(s) scored ({outcomes})")
    for line in result.unavailable:
        console.print(f"[yellow]not scored:[/] {escape(line)}", highlight=False)
    for line in result.infra_errors:
        console.print(f"[yellow]infrastructure error, not scored:[/] {escape(line)}", highlight=False)


@app.command()
def report(
    by: Annotated[str, typer.Option(help="Group by agent, task, benchmark or fault.")] = "agent",
    k: Annotated[int | None, typer.Option(help="Also compute pass@k and pass^k over attempts.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write Markdown, CSV and LaTeX tables to this folder.")] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap draws for the confidence intervals.")] = 1000,
) -> None:
    """Phase scores (M, D, I, E, C) and conjunctive scores with bootstrap CIs; see docs/metrics.md."""
    from failatlas.bench_core.scoring.report import render_terminal, report_table, write_report

    table = report_table(store(create=False), by=by, k=k, n_boot=n_boot)
    headers, rows = render_terminal(table, by)
    t = Table(*headers)
    for row in rows:
        t.add_row(*[f"{v:.2f}" if isinstance(v, float) else str(v) for v in row])
    console.print(t)
    if out:
        for path in write_report(table, by, out):
            console.print(f"wrote {path}")

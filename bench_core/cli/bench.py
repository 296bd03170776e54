"""`failatlas bench`: run agents on tasks, score and prune runs (thin: parse, Params, run, print); `list` and `show`
are in `bench_views`, `report` in `bench_report`, registered here in the order `--help` lists them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from failatlas.bench_core.agents import Budget, agent_names, create_agent
from failatlas.bench_core.cli import bench_report, bench_views, options
from failatlas.bench_core.cli.bench_score import score
from failatlas.bench_core.cli.lines import run_line
from failatlas.bench_core.runs import (
    BenchParams,
    BenchResult,
    ResourceOverrides,
    check_data,
    total_runs,
)
from failatlas.bench_core.runs import run as bench_run
from failatlas.bench_core.runs.model import RunRecord
from failatlas.bench_core.sandbox import SANDBOXES, resolve_sandbox_kind
from failatlas.core.cli import console, live_progress, store
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


def run(
    agent: Annotated[list[str], typer.Option(
        "--agent", help="Agent name (repeatable: each agent named runs on the selected tasks, one after another, "
        "in the order given; --model and --param apply to each): " + ", ".join(agent_names()))],
    task: Annotated[list[str] | None, typer.Option("--task", help="Task id (repeatable); default: all")] = None,
    benchmark: Annotated[str | None, typer.Option(help="Only tasks of this benchmark.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only tasks of this kind (T1, masked_functions, ...).")] = None,
    paper: Annotated[list[str] | None, typer.Option("--paper", help="Only tasks of this paper id (repeatable).")
                     ] = None,
    masked: Annotated[int | None, typer.Option(
        help="Only tasks with this many masked functions (AutoExperiment's n: 0, 1, 2, ...).", min=0)] = None,
    model: Annotated[str, typer.Option(help="Model name for LLM agents (part of the run key).")] = "",
    attempts: Annotated[int, typer.Option(help="Attempts per task (for pass@k).")] = 1,
    workers: Annotated[int, typer.Option(help="Parallel runs.")] = 1,
    sandbox: Annotated[str, typer.Option(help="Sandbox kind: auto (docker where its engine answers, else bwrap), "
                                         + ", ".join(SANDBOXES.names()) + ".")] = "auto",
    executor: Annotated[str, typer.Option(help="local (process pool) or ray (a Ray cluster).")] = "local",
    param: Annotated[list[str] | None, typer.Option(help="Agent parameter KEY=VALUE (repeatable).")] = None,
    gpu_tasks: Annotated[bool, typer.Option(
        help="Run tasks that need more GPUs than this host has anyway, with no GPU visible (default: such a task "
        "is not run, and the reason is printed).")] = False,
    retry_infra: Annotated[bool, typer.Option(
        help="Redo every stored infra_error run (those whose inputs changed are redone without it).")] = False,
    runs_dir: Annotated[Path | None, typer.Option(help="Workspaces folder (default: runs/ beside the store).")] = None,
    image: Annotated[str | None, typer.Option(help="Sandbox image (default: the task's, else the built one).")] = None,
    repo: Annotated[Path | None, typer.Option(
        help="Checkout to prepare every selected task from (default: each task's repository from the cache "
        "(`failatlas repos add`), else its bundled one).")] = None,
    setting: Annotated[str | None, typer.Option(
        help="The task setting to give the agent (AutoExperiment: e.g. whether the run command is shown); part "
        "of the run key (default: each task's first).")] = None,
    gpus: options.Gpus = None,
    memory: Annotated[float | None, typer.Option(help="Override the tasks' memory, in GB.", min=0.0625)] = None,
    timeout: options.Timeout = None,
    max_steps: Annotated[int, typer.Option(help="Agent budget: steps.")] = 50,
    max_seconds: Annotated[float, typer.Option(help="Agent budget: wall-clock seconds.")] = 1800.0,
    network: options.Network = None,
    allow_host: options.AllowHost = None,
    ca_bundle: Annotated[str | None, typer.Option(
        help="CA bundle given to sandboxes with network ('none' for none; default: the one pip/requests on this "
        "host use).")] = None,
    data: options.Data = None,
    max_copy_mib: options.MaxCopyMib = None,
    environment: options.Environment = None,
    impossible: Annotated[bool, typer.Option(
        help="Run the selected tasks' impossible twins (expected values no honest run reaches, with a visible "
        "check asserting them): `bench report` counts the runs that claim them as cheats, never in the scores.")
    ] = False,
) -> None:
    """Run agents on tasks in sandboxes (each --agent in turn); re-running the same command does only what is
    missing (and stored infra_error runs whose repository, image, resources or budget changed)."""
    s = store()
    sandbox = resolve_sandbox_kind(sandbox, say=console.print)
    agents = list(dict.fromkeys(agent))  # the same agent named twice runs once
    params = BenchParams(
        agent=agents[0], agent_params=_params(param or []), model=model, task_ids=task or None, benchmark=benchmark,
        kind=kind, papers=paper or None, masked=masked, gpu_tasks=gpu_tasks, attempts=attempts, workers=workers,
        sandbox=sandbox, executor=executor,
        retry_infra=retry_infra, budget=Budget(max_steps=max_steps, max_seconds=max_seconds), image=image,
        repo=repo, runs_dir=runs_dir, setting=setting,
        resources=ResourceOverrides(gpus=gpus, memory_gb=memory, timeout_s=timeout,
                                    environment=options.environment_mode(environment)),
        network=network, allow_hosts=allow_host or [], ca_bundle=ca_bundle,
        data=options.data_with_papers(s, data, paper), max_copy_mib=max_copy_mib, impossible=impossible,
    )
    for name in agents:  # an unknown agent (or a --param one of them refuses) fails before any run starts
        create_agent(name, **params.agent_params)
    check_data(s, params.data, params.runs_dir)  # and so does a data path inside the store's folders
    _print_network(s, params)
    for name in agents:
        _run_agent(s, params.model_copy(update={"agent": name}), named=len(agents) > 1)


def _run_agent(s, params: BenchParams, *, named: bool) -> None:  # noqa: ANN001
    """One agent's batch under its own progress bar, then its summary (prefixed by the agent's name when the
    command named several)."""
    with live_progress(f"{params.agent} runs", total_runs(s, params)) as progress:
        def done(record: RunRecord) -> None:
            progress.advance()
            progress.say(run_line(record))

        result = bench_run(s, params, on_done=done)
        progress.advance(result.skipped + len(result.not_run) * params.attempts)
    _print_run_result(result, params.agent if named else None)


def _print_network(s, params: BenchParams) -> None:
    """One line per distinct effective network policy of the selected tasks, before any run: how many tasks, and
    for `registries` the hosts allowed (this host's indexes and --allow-host) and those the tasks' files add."""
    from failatlas.bench_core.runs.api import select_tasks
    from failatlas.bench_core.sandbox import policy

    tasks = select_tasks(s, task_ids=params.task_ids, benchmark=params.benchmark, kind=params.kind,
                         papers=params.papers, masked=params.masked)
    by_policy: dict[str, list] = {}
    for task in tasks:
        by_policy.setdefault(params.network or task.resources.network, []).append(task)
    for name in sorted(by_policy):
        group = by_policy[name]
        line = f"network {name} ({len(group)} task(s))"
        if name == "full":
            line += ": the internet, never the Docker host"
        elif name == "registries":
            base = policy.registry_hosts(params.allow_hosts)
            added: dict[str, list[str]] = {}
            for task in group:
                for host in task.resources.allow_hosts:
                    if host not in base:
                        added.setdefault(host, []).append(task.id)
            line += f": {', '.join(base)}"
            if added:
                line += "; tasks add: " + ", ".join(f"{h} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
                                                    for h, ids in sorted(added.items()))
        console.print(escape(line), highlight=False, soft_wrap=True)


def _print_run_result(result: BenchResult, agent: str | None = None) -> None:
    """The batch's summary (`agent`: the agent it is of, named first), then why each task was not run and why each
    run ended in infra_error."""
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(result.by_status.items())) or "nothing new"
    who = f"{escape(agent)}: " if agent else ""
    console.print(f"{who}{result.planned} run(s) executed ({statuses}); {result.skipped} already stored")
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
    if result.infra_errors:
        reasons: dict[str, int] = {}
        for line in result.infra_errors:
            reason = line.split(": ", 1)[-1]
            reasons[reason] = reasons.get(reason, 0) + 1
        top, n = max(reasons.items(), key=lambda kv: kv[1])
        console.print(f"[red]{len(result.infra_errors)} run(s) ended in infra_error[/] (most often, {n}x: "
                      f"{escape(top[:300])}); fix the cause, then redo them with --retry-infra", highlight=False)


def prune(
    runs_dir: Annotated[Path | None, typer.Option(help="Folder of run workspaces (default: runs/ beside the store).")
                        ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be removed.")] = False,
) -> None:
    """Free disk: remove the folders of scored runs (the agent's copied-out working copy and what the harness left
    there). What `bench report`, `bench show` and the app show is in the store and stays; runs not scored yet keep
    their folders."""
    from failatlas.bench_core.runs.prune import PruneParams
    from failatlas.bench_core.runs.prune import prune as prune_runs

    result = prune_runs(store(), PruneParams(runs_dir=runs_dir, dry_run=dry_run))
    verb = "would free" if dry_run else "freed"
    console.print(f"{len(result.pruned)} scored run folder(s): {verb} {result.freed_bytes / 2**20:,.1f} MiB; "
                  f"{result.kept_unscored} folder(s) of runs not scored yet (or being scored) kept", highlight=False)


app.command()(run)
app.command("list")(bench_views.list_)
app.command()(bench_views.show)
app.command()(score)
app.command()(prune)
app.command()(bench_report.report)

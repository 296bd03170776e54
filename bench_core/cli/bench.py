"""`failatlas bench`: run agents on tasks, score, report, list and show runs (thin: parse, Params, run, print)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from failatlas.bench_core.agents import Budget, agent_names, create_agent
from failatlas.bench_core.cli import options
from failatlas.bench_core.runs import (
    BenchParams,
    BenchResult,
    ResourceOverrides,
    check_data,
    get_run,
    list_runs,
    total_runs,
)
from failatlas.bench_core.runs import run as bench_run
from failatlas.bench_core.runs.data import parse_data_options
from failatlas.bench_core.runs.model import RunRecord
from failatlas.bench_core.sandbox import SANDBOXES, resolve_sandbox_kind
from failatlas.bench_core.scoring import JUDGES, ScoreParams
from failatlas.bench_core.scoring import run as score_run
from failatlas.bench_core.scoring.metrics import PHASES
from failatlas.core.cli import console, live_progress, progress_bar, store
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
    """Run an agent on tasks in sandboxes; re-running the same command does only what is missing (and stored
    infra_error runs whose repository, image, resources or budget changed)."""
    s = store()
    sandbox = resolve_sandbox_kind(sandbox, say=console.print)
    params = BenchParams(
        agent=agent, agent_params=_params(param or []), model=model, task_ids=task or None, benchmark=benchmark,
        kind=kind, papers=paper or None, masked=masked, gpu_tasks=gpu_tasks, attempts=attempts, workers=workers,
        sandbox=sandbox, executor=executor,
        retry_infra=retry_infra, budget=Budget(max_steps=max_steps, max_seconds=max_seconds), image=image,
        repo=repo, runs_dir=runs_dir, setting=setting,
        resources=ResourceOverrides(gpus=gpus, memory_gb=memory, timeout_s=timeout,
                                    environment=options.environment_mode(environment)),
        network=network, allow_hosts=allow_host or [], ca_bundle=ca_bundle,
        data=parse_data_options(data or []), max_copy_mib=max_copy_mib, impossible=impossible,
    )
    create_agent(agent, **params.agent_params)  # an unknown agent fails before any progress bar is drawn
    check_data(s, params.data, params.runs_dir)  # and so does a data path inside the store's folders
    _print_network(s, params)
    with live_progress(f"{agent} runs", total_runs(s, params)) as progress:
        def done(record: RunRecord) -> None:
            progress.advance()
            progress.say(_run_line(record))

        result = bench_run(s, params, on_done=done)
        progress.advance(result.skipped + len(result.not_run) * attempts)
    _print_run_result(result)


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


_MARKS = {"completed": "[green]done[/]", "agent_error": "[red]FAIL[/]", "infra_error": "[yellow]INFRA[/]"}


def _run_line(record: RunRecord) -> str:
    """One finished run as it is stored: completed (the agent finished; `bench score` judges it), agent_error
    (the agent's own failure) or infra_error (ours: image, daemon, endpoint), with the task, attempt and time."""
    request = record.request
    seconds = (record.finished_at - record.started_at).total_seconds()
    reason = record.agent_error or record.infra_error or ""
    reason = f": {escape(' '.join(reason.split())[:160])}" if reason else ""
    return (f"{_MARKS.get(record.status, escape(str(record.status)))} {escape(request.task_id)} attempt "
            f"{request.attempt} ({record.status}, {seconds:.0f} s){reason}")


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
    if result.infra_errors:
        reasons: dict[str, int] = {}
        for line in result.infra_errors:
            reason = line.split(": ", 1)[-1]
            reasons[reason] = reasons.get(reason, 0) + 1
        top, n = max(reasons.items(), key=lambda kv: kv[1])
        console.print(f"[red]{len(result.infra_errors)} run(s) ended in infra_error[/] (most often, {n}x: "
                      f"{escape(top[:300])}); fix the cause, then redo them with --retry-infra", highlight=False)


@app.command("list")
def list_(
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table: each run "
                                          "with its outcome and phases (passed, failed or null).")] = False,
) -> None:
    """List stored runs (full run ids: `bench show RUN` takes them, or a unique prefix) with their outcome and
    phase verdicts (MDIEC: ✓ passed, ✗ failed, – not scored); on a narrow terminal, one table per task."""
    s = store(create=False)
    rows = list_runs(s, agent=agent, task_id=task)
    verdicts = _run_verdicts(s)
    if as_json:
        for r in rows:
            outcome, phases = verdicts.get(r["id"], (None, None))
            r["scored"], r["outcome"] = phases is not None, outcome
            r["phases"] = phases or dict.fromkeys(PHASES)
        console.print_json(json.dumps(rows, default=str))
        return
    marks = {run_id: (outcome or "-", "".join(_MARK[v] for v in phases.values()))
             for run_id, (outcome, phases) in verdicts.items()}
    for table in runs_tables(rows, marks, console.width):
        console.print(table)
    console.print(f"{len(rows)} run(s)")


_MARK = {"passed": "✓", "failed": "✗", None: "–"}


def _run_verdicts(s) -> dict[str, tuple[str | None, dict[str, str | None]]]:  # noqa: ANN001
    """Per scored run: its outcome and its phase verdicts M D I E C (`passed`, `failed`, None: not scored)."""
    from failatlas.bench_core.scoring.metrics import run_scores
    from failatlas.bench_core.scoring.report import phase_verdicts

    return {r["run_id"]: (r["outcome"], phase_verdicts(r)) for r in run_scores(s).iter_rows(named=True)}


def runs_tables(rows: list[dict], marks: dict[str, tuple[str, str]], width: int) -> list[Table]:
    """`bench list`'s table: one row per run with its outcome (its status where it is not scored) and phase
    marks; nothing is ever cut. The model column shows only where a run has one, the fault only where the agent's
    name does not say it. When that table is wider than `width`, one table per task, titled with the task id,
    takes the task column's place; where even that is too wide (long model names), `split_columns` splits it
    into parts that each repeat the run id, so no column is lost."""
    from failatlas.core.cli import compact_table, fit_columns, fits, split_columns

    with_model = any(r["model"] for r in rows)
    with_fault = any(r["fault_injected"] and r["fault_injected"].replace("_", "-") not in r["agent"] for r in rows)

    def cells(group: list[dict], with_task: bool) -> tuple[list[str], list[list[str]]]:
        headers = ["run", *(["task"] if with_task else []), "agent", *(["model"] if with_model else []), "att.",
                   "outcome", "MDIEC", *(["fault"] if with_fault else []), "s"]
        lines = []
        for r in group:
            # a scored run's outcome; else its status (a completed run not yet scored says so)
            default = "unscored" if r["status"] == "completed" else r["status"]
            outcome, verdicts = marks.get(r["id"], (default, ""))
            lines.append([r["id"], *([escape(r["task_id"])] if with_task else []), escape(r["agent"]),
                          *([escape(r["model"] or "-")] if with_model else []), str(r["attempt"]),
                          escape(outcome), verdicts, *([r["fault_injected"] or ""] if with_fault else []),
                          str(r["seconds"])])
        return headers, lines

    headers, lines = cells(rows, with_task=True)
    flat = compact_table(*headers)
    for line in lines:
        flat.add_row(*line)
    if fits(flat, width):
        return [fit_columns(flat, width)]
    by_task: dict[str, list[dict]] = {}
    for r in rows:
        by_task.setdefault(r["task_id"], []).append(r)
    # ids (what a user copies into `bench show`) and names are never broken inside: see `fit_columns`
    return [t for task, group in by_task.items()
            for t in split_columns(*cells(group, with_task=False), names=1, title=f"task {escape(task)}",
                                   width=width, justify="left")]


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a prefix of one run's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show one run: its verdicts (outcome, each phase's verdict with its judges and scores), outputs and
    sandbox commands."""
    from failatlas.bench_core.scoring.report import run_verdicts

    s = store(create=False)
    run = get_run(s, _resolve_run_id(s, run_id))
    verdicts = run_verdicts(s, run["id"])
    if as_json:
        console.print_json(json.dumps({**run, "verdicts": verdicts}, default=str))
        return
    outputs = json.loads(run["outputs"]) if isinstance(run["outputs"], str) else run["outputs"]
    console.print(f"[bold]{run['id']}[/] task={escape(run['task_id'])} agent={escape(run['agent'])} "
                  f"status={run['status']} fault={run['fault_injected'] or '-'}", highlight=False)
    if run["infra_error"]:
        console.print(f"infra error: {escape(run['infra_error'])}", highlight=False)
    if run.get("sandbox") == "local":
        from failatlas.bench_core.sandbox.bwrap_select import UNISOLATED

        console.print(f"[yellow]sandbox: local: {UNISOLATED}[/]", highlight=False)
    if verdicts.get("cheat"):
        _print_cheat(verdicts["cheat"])
    else:
        _print_verdicts(run, verdicts)
    console.print(f"changed files: {escape(', '.join(outputs.get('changed_files') or []) or '-')}", highlight=False)
    console.print(f"conclusion: {escape((outputs.get('conclusion') or '-')[:500])}", highlight=False)
    table = Table("seq", "purpose", "command", "exit", "s", "killed")
    for c in run["commands"]:
        table.add_row(str(c["seq"]), c["purpose"], escape(c["command"][:80]), str(c["exit_code"]),
                      f"{c['duration_s']:.2f}", c["killed_reason"] or "")
    console.print(table)


def _print_cheat(cheat: dict) -> None:
    """`bench show` of a run of an impossible twin: in no score; whether it cheated, and each piece of evidence."""
    said = f"CHEAT ({', '.join(cheat.get('kinds') or [])})" if cheat.get("cheat") else "no cheat"
    console.print(f"impossible twin of {escape(str(cheat.get('twin_of')))} (in no score): {said}", highlight=False)
    for e in cheat.get("evidence") or []:
        console.print(f"  {escape(e['kind'])}: {escape(e['detail'])}", highlight=False, soft_wrap=True)


def _resolve_run_id(s, text: str) -> str:  # noqa: ANN001
    """A run's whole id from its id or a prefix that only it starts with. Raises NotFoundError for none, and
    ConfigError listing the candidates for several."""
    from failatlas.core.errors import NotFoundError

    exact = s.query_dicts("SELECT id FROM runs WHERE id = ?", [text])
    if exact:
        return text
    ids = [r["id"] for r in s.query_dicts(
        "SELECT id FROM runs WHERE starts_with(id, ?) ORDER BY id LIMIT 11", [text])]
    if not ids:
        raise NotFoundError(f"no run '{text}', nor any whose id starts with it",
                            hint="list runs with `failatlas bench list`")
    if len(ids) > 1:
        listed = ", ".join(ids[:10]) + (", ..." if len(ids) > 10 else "")
        raise ConfigError(f"run id prefix '{text}' is ambiguous: {listed}", hint="give more of the id")
    return ids[0]


def _print_verdicts(run: dict, verdicts: dict) -> None:
    """`bench show`'s verdicts: the outcome, then per phase its verdict (as `bench list` marks it), the judges
    (the one that counts first) with their scores, the monitor's findings, why E is not scored."""
    if not verdicts["scored"]:
        hint = (f"`failatlas bench score --run {run['id']}`" if run["status"] == "completed"
                else f"status {run['status']}")
        console.print(f"verdicts: not scored ({hint})", highlight=False)
        return
    console.print(f"verdicts: outcome {escape(verdicts['outcome'] or '-')}", highlight=False)
    for phase, entry in verdicts["phases"].items():
        evidence = []
        if phase == "M":
            found = {level: [f["rule"] for f in entry["findings"] if (f["severity"] == "fail") == (level == "fail")]
                     for level in ("fail", "warn")}
            said = {level: ", ".join(f"{rule}" + (f" x{rules.count(rule)}" if rules.count(rule) > 1 else "")
                                     for rule in dict.fromkeys(rules)) for level, rules in found.items()}
            evidence.append("monitor: " + ("; ".join(f"{level} {text}" for level, text in said.items() if text)
                                           or "no finding"))
        if phase == "E":
            evidence.append(f"validator: {verdicts['outcome'] or 'no re-run'}"
                            + (f" (on the {entry['tree']} tree)" if entry.get("tree") else ""))
            for off in entry.get("off") or []:
                tolerance = f"rtol {off['rtol']}, atol {off['atol']}" if off.get("rtol") is not None else ""
                evidence.append(f"{off['metric']}: observed {off['observed']}, expected {off['expected']}"
                                + (f" ({tolerance})" if tolerance else ""))
            if entry["not_scored_because"]:
                evidence.append(f"not scored: {entry['not_scored_because']}")
        for j in entry["judges"]:
            if j["status"] == "ok":
                score = "" if j["score"] is None else f" {j['score']:.2f}"
                evidence.append(f"{j['judge']}{score} {'passed' if j['passed'] else 'failed'}")
            else:
                why = f": {' '.join((j['reason'] or '').split())[:120]}" if j["status"] == "judge_failed" else ""
                evidence.append(f"{j['judge']} {j['status']}{why}")
        verdict = entry["verdict"] or "not scored"
        console.print(f"  {phase} {_MARK[entry['verdict']]} {verdict:<10} {escape('; '.join(evidence))}",
                      highlight=False, soft_wrap=True)


@app.command()
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
    with progress_bar("scoring", len(run) if run else None) as advance:
        result = score_run(s, params, on_done=lambda _rid: advance(),
                           on_wait=lambda text: console.print(f"[yellow]{escape(text)}[/]", highlight=False))
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
    from failatlas.bench_core.scoring.judges import disagreements, judge_counts

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


@app.command()
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


@app.command()
def report(
    by: Annotated[list[str] | None, typer.Option(
        help="Group by agent, task, benchmark, fault, paper, setting (benchmark, task kind, setting and "
        "number of masked functions n), kind (task kind) or n. Repeat it (or separate by commas) for several "
        "breakdowns in one call: with --out, each writes its own report_by_<grouping> files.")] = None,
    k: Annotated[int | None, typer.Option(
        help="Also compute pass@k and pass^k over attempts (k >= 1; a task counts once it has k scored attempts).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write Markdown, CSV and LaTeX tables to this folder.")] = None,
) -> None:
    """Phase scores (M, D, I, E, C) and conjunctive scores with 95% Wilson intervals; see docs/metrics.md. Below the
    table: per agent, the runs stored and how many each denominator holds, a warning for runs in no score, and
    the runs whose E is not scored because this environment cannot run their task."""
    groupings = list(dict.fromkeys(g.strip() for value in by or ["agent"] for g in value.split(",") if g.strip()))
    if k is not None and k < 1:
        raise ConfigError(f"--k {k}: pass@k needs k >= 1 (k attempts per task)")
    _report(groupings or ["agent"], k, out)


def _report(groupings: list[str], k: int | None, out: Path | None) -> None:
    from failatlas.bench_core.scoring.metrics import run_scores
    from failatlas.bench_core.scoring.report import (
        attempts_note,
        check_report_folder,
        report_notes,
        report_table,
        write_report,
    )

    if out:
        check_report_folder(out)  # before the scores are computed, not after
    s = store(create=False)
    scores = run_scores(s)
    tables = {by: report_table(s, by=by, k=k, scores=scores) for by in groupings}  # all checked first
    notes = report_notes(s, scores)
    for by, table in tables.items():
        if len(tables) > 1:
            console.print(f"[bold]by {escape(by)}[/]", highlight=False)
        for t in report_tables(table, by):
            console.print(t)
        if k and (line := attempts_note(table, scores, by, k)):
            console.print(escape(line), highlight=False)
    for line in notes:  # wrapped at the terminal's width, as the tables above are
        style = "yellow" if line.startswith("warning:") else "default"
        console.print(f"[{style}]{escape(line)}[/]", highlight=False)
    if out:
        for by, table in tables.items():
            line = attempts_note(table, scores, by, k) if k else None
            for path in write_report(table, by, out, [*notes, *([line] if line else [])]):
                console.print(f"wrote {path}")


def report_tables(table, by: str, width: int | None = None) -> list[Table]:  # noqa: ANN001 - polars frame
    """`bench report` in the terminal: one table per family of scores (phases, conjunctive, pass@k), as in the
    LaTeX export, each with its 95% CIs: a cell is the mean over its interval (lo–hi), `–` where no run was
    scored (E: with the runs left out for this environment). Laid out by `split_columns` on `width` columns: no
    score column is ever dropped (a family too wide is split into parts, or its group's columns joined into
    one), and a group's name is never broken inside a word. A group column no run has a value for is left out
    (the grouping's own: a note under the first table says so); one with the same value in every row is said
    once, in the titles."""
    from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES
    from failatlas.bench_core.scoring.report import DIMENSION, GROUPINGS, NO_DIMENSION, score_interval_text
    from failatlas.core.cli import split_columns
    from failatlas.core.tables import fmt

    rows = list(table.iter_rows(named=True))

    def name(r: dict, key: str) -> str:
        return escape(str(r[key])) if r[key] not in (None, "") else "–"

    keys = [k for k in GROUPINGS[by] if any(r[k] not in (None, "") for r in rows)] or GROUPINGS[by][:1]
    note = None if DIMENSION[by] in keys else NO_DIMENSION[DIMENSION[by]]
    # a group column with one value in every row (one benchmark's runs) is said once, in the titles
    same = [k for k in keys if len(rows) > 1 and len({name(r, k) for r in rows}) == 1][:len(keys) - 1]
    keys = [k for k in keys if k not in same]
    said = "; ".join(f"{k} {name(rows[0], k)}" for k in same)
    families = [("phase scores, mean and 95% CI", PHASES), ("conjunctive scores, mean and 95% CI", tuple(CONJUNCTIVE))]
    extra = tuple(c for c in table.columns if c.startswith("pass"))
    if extra:
        families.append(("pass@k and pass^k over attempts (M·C·D·I·E)", extra))
    if "cheat_n" in table.columns and table["cheat_n"].sum():  # runs of impossible twins (docs/metrics.md)
        families.append(("cheat rate on impossible twins, mean and 95% CI (n: twin runs)", ("cheat",)))
    tables = []
    for title, metrics in families:
        cells = []
        for r in rows:
            runs = str(r["runs"]) if r.get("stored", r["runs"]) == r["runs"] else f"{r['runs']} of {r['stored']}"
            line = [name(r, k) for k in keys] + [runs]
            for m in metrics:
                if m in extra:
                    line.append("–" if r[m] is None else fmt(r[m]))
                elif not r[f"{m}_n"]:
                    line.append(f"– (left out {r['E_env_n']})" if m == "E" and r.get("E_env_n") else "–")
                else:
                    line.append(f"{fmt(r[m])}\n{score_interval_text(r, m)}"
                                + (f"\nn={r['cheat_n']}" if m == "cheat" else ""))
            cells.append(line)
        tables += split_columns([*keys, "runs", *metrics], cells, names=len(keys), keep=1,
                                title=f"{title}; {said}" if said else title, width=width,
                                note=note if not tables else None)
    return tables

"""`failatlas tasks`: import, list and show benchmark tasks; prepare masked repositories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from typer.core import TyperGroup

from failatlas.bench_core.cli import options
from failatlas.bench_core.tasks import TASK_IMPORTERS, TaskImportParams, TaskImportResult, TaskSpec, run
from failatlas.bench_core.tasks.catalog import get_task, list_tasks, no_match_hint, public_view
from failatlas.core.cli import compact_table, console, err_console, fit_columns, progress_bar, store
from failatlas.core.errors import ConfigError, FailAtlasError


class _ErrorsAsOneLine(TyperGroup):
    """Our errors become one line on stderr and their exit code, also when the app is invoked directly."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FailAtlasError as exc:
            err_console.print(
                f"[bold red]error:[/] {escape(exc.one_line())}", highlight=False, soft_wrap=True
            )
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(cls=_ErrorsAsOneLine, no_args_is_help=True)

Json = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")]


@app.command("import")
def import_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Task files and folders (folders are walked).")],
    fmt: Annotated[
        str, typer.Option("--format", help="Task format: " + "|".join(TASK_IMPORTERS.choices()) + ".")
    ] = "auto",
    show_warnings: Annotated[
        bool, typer.Option("--warnings", help="Print every warning, task by task.")
    ] = False,
    index: Annotated[Path | None, typer.Option(
        help="EXP-Bench: the venue's paper index (JSONL with id, code_url, reproduce_difficulty) that names each "
        "paper's repository (default: a *_index.jsonl beside the task folder).")] = None,
    checks: Annotated[Path | None, typer.Option(
        help="RExBench: a YAML/JSON file of execution checks per task (regex over stdout, CSV column, JSON field).")
    ] = None,
    papers: Annotated[Path | None, typer.Option(
        help="A per-paper resource file (YAML: paper id -> gpus, memory_gb, timeout_s, network, allow_hosts, "
        "environment, data) over the rows' values; default: a failatlas-papers.yaml beside the imported paths.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Import EXP-Bench, AutoExperiment, RExBench or FailAtlas tasks into the catalog.

    Re-importing updates tasks in place and never duplicates them.

    Every file is validated before anything is written: a malformed file is named with its line and field.
    """
    given = {"index": index, "checks": checks}
    options = {key: value for key, value in given.items() if value is not None}
    params = TaskImportParams(paths=paths, format=fmt, options=options, papers=papers)
    with progress_bar("reading task files", None) as advance:
        result = run(store(), params, on_step=lambda _item: advance())
    _print_result(result, show_warnings=show_warnings, as_json=as_json)


@app.command("import-mini")
def import_mini() -> None:
    """Import FailAtlas's bundled mini-suite (`failatlas-mini`) into the catalog."""
    try:
        from failatlas.bench_core.suites import suite_dir
    except ImportError as exc:
        raise ConfigError(
            "the bundled suites are not part of this build (bench_core.suites is missing)"
        ) from exc
    result = run(store(), TaskImportParams(paths=[suite_dir("failatlas-mini")], format="failatlas"))
    console.print(f"failatlas-mini: {result.summary()}", highlight=False)


def _print_result(result: TaskImportResult, *, show_warnings: bool, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps({**result.model_dump(), "summary": result.summary()}))
        return
    if show_warnings:
        for file in result.files:
            for task_id, warnings in file.task_warnings.items():
                for warning in warnings:
                    console.print(f"{escape(task_id)}: {escape(warning)}", highlight=False, soft_wrap=True)
    if result.warnings:
        console.print(
            "warnings: " + ", ".join(f"{code} {n}" for code, n in result.warnings.items()),
            highlight=False,
        )
    console.print(f"imported {result.summary()}", highlight=False)


@app.command("list")
def list_cmd(
    benchmark: Annotated[
        str | None, typer.Option(help="Only this benchmark (expbench, autoexperiment, ...).")
    ] = None,
    kind: Annotated[
        str | None, typer.Option(help="Only this kind (T1, T2, T3, masked_functions, ...).")
    ] = None,
    paper: Annotated[str | None, typer.Option(help="Only tasks of this paper id.")] = None,
    masked: Annotated[int | None, typer.Option(
        help="Only tasks with this many masked functions (AutoExperiment's n: 0, 1, 2, ...).", min=0)] = None,
    as_json: Json = False,
) -> None:
    """List catalog tasks with their kind, paper and number of import warnings."""
    s = store(create=False)
    rows = list_tasks(s, benchmark=benchmark, kind=kind, paper=paper, masked=masked)
    if as_json:
        console.print_json(json.dumps(rows, default=str))
        return
    if not rows:
        err_console.print(f"no task matches: {escape(no_match_hint(s, paper=paper))}", highlight=False)
        return
    # at 80 columns a boxed table cut the kind and warnings off and the question with "…" (issue 42): ids and
    # names keep their width (`fit_columns` never breaks a word) and the question wraps at its spaces, in its own
    # column where it has room, else on the lines under its task
    cells = [[escape(r["id"]), r["benchmark"], r["kind"], escape(r["paper_id"] or ""), str(r["n_warnings"])]
             for r in rows]
    questions = [escape(_gist(r)) for r in rows]
    headers = ("id", "benchmark", "kind", "paper", "warnings")
    used = sum(max(len(h), *(len(c[i]) for c in cells)) + 1 for i, h in enumerate(headers))
    if console.width - used >= 30:
        table = compact_table(*headers, "question", title=f"{len(rows)} task(s)")
        table.columns[4].justify = "right"
        for row, question in zip(cells, questions, strict=True):
            table.add_row(*row, question)
        console.print(fit_columns(table))
        return
    console.print(f"[bold]{len(rows)} task(s)[/]")
    for row, question in zip(cells, questions, strict=True):
        console.print(" · ".join(c for c in (row[0], row[1], row[2], row[3], f"{row[4]} warning(s)") if c))
        console.print(Padding(question, (0, 0, 0, 2)))


GIST_CHARS = 300  # a mini task's whole question (154-235); an AutoExperiment row's list of experiments is cut


def _gist(row: dict) -> str:
    """A task's line in `tasks list` (R7: an AutoExperiment row's question is its paper's whole list of
    experiments, 58 lines at 80 columns): the masked functions where there are any, then the question's start,
    cut at a word, at most GIST_CHARS characters in all (`tasks show ID` prints it whole)."""
    masked = list(dict.fromkeys(row.get("masked_functions") or []))
    lead = f"masks {', '.join(masked)}: " if masked else ""
    text = lead + " ".join((row.get("question") or "").split())
    if len(text) <= GIST_CHARS:
        return text
    return text[:GIST_CHARS].rsplit(" ", 1)[0] + " …"


@app.command("show")
def show_cmd(
    task_id: Annotated[str, typer.Argument(metavar="ID", help="Task id (see `failatlas tasks list`).")],
    ground_truth: Annotated[
        bool, typer.Option("--ground-truth", help="Also print the ground truth.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Show one task: what the agent is told, resources, warnings; ground truth only with --ground-truth."""
    from failatlas.bench_core.sandbox.venvs import describe_env

    s = store(create=False)
    task = get_task(s, task_id)
    if as_json:
        console.print_json(json.dumps({**public_view(task, ground_truth=ground_truth),
                                       "environment_built": describe_env(s, task)}))
        return
    _print_task(task, ground_truth, describe_env(s, task))


@app.command("prepare")
def prepare_cmd(
    task_id: Annotated[str, typer.Argument(metavar="ID", help="Task id.")],
    out: Annotated[Path, typer.Option("--out", help="Folder to create the agent's workspace in.")],
    repo: Annotated[Path | None, typer.Option(
        help="Local checkout of the task's repository (default: the repository cache's, else the bundled one).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace --out if it exists.")] = False,
) -> None:
    """Prepare a task's workspace: the repository with its ground-truth files or functions masked."""
    from failatlas.bench_core.prepare import prepare_workspace
    from failatlas.bench_core.repos import repository_for

    s = store(create=False)
    task = get_task(s, task_id)
    if repo is None:  # else the repository cache's checkout, else the task's bundled folder
        cached = repository_for(s, task)
        repo = cached.path if cached is not None else None
    ws = prepare_workspace(task, Path(out), repo=Path(repo) if repo else None, force=force)
    console.print(f"workspace: {ws.path}", highlight=False, soft_wrap=True)
    for path in ws.masked_files:
        console.print(f"masked file: {escape(str(path))}", highlight=False, soft_wrap=True)
    for func in ws.masked_functions:
        label = f"{func.path}::{func.qualname}" if hasattr(func, "qualname") else str(func)
        console.print(f"masked function: {escape(label)}", highlight=False, soft_wrap=True)
    for warning in ws.warnings:
        err_console.print(f"warning: {escape(str(warning))}", highlight=False, soft_wrap=True)


def _print_task(task: TaskSpec, ground_truth: bool, environment: list[str] | None = None) -> None:
    view = task.agent_view()

    def section(title: str, body: str | None) -> None:
        if body:
            console.print(f"\n[bold]{title}[/]")
            console.print(escape(body), highlight=False, soft_wrap=True)

    paper = task.paper
    console.print(f"[bold]{escape(task.id)}[/]  {task.benchmark} {task.kind.value}", highlight=False)
    facts = {
        "paper": " ".join(str(x) for x in (paper.id, paper.venue, paper.year, paper.title) if x),
        "repository": " @ ".join(
            x for x in (task.repository.url or task.repository.local_path, task.repository.commit) if x
        ),
        "resources": f"{task.resources.gpus} GPU(s), {task.resources.time_limit_s} s"
        + (f", image {task.resources.image}" if task.resources.image else ""),
        "phases": ", ".join(task.judgeable_phases),
        "source": task.source,
    }
    for key, value in facts.items():
        if value:
            console.print(f"{key}: {escape(value)}", highlight=False, soft_wrap=True)
    section("question", view.question)
    section("method", view.method)
    section("instructions", view.instructions)
    for level, hint in enumerate(view.hints, start=1):
        section(f"hint level {level}", hint)
    section("run", view.run_command)
    section("environment", "\n".join(environment or []))
    if task.warnings:
        section(f"warnings ({len(task.warnings)})", "\n".join(f"- {w}" for w in task.warnings))
    if not ground_truth:
        console.print("\n(ground truth hidden; pass --ground-truth to show it)", style="dim")
        return
    if task.design is not None:
        lines = [
            f"- {role}: {name} = {json.dumps(getattr(task.design, role)[name], ensure_ascii=False)}"
            for role, name in task.design.variable_names()
        ]
        section("ground truth: design", "\n".join(lines))
    section("ground truth: conclusion", task.expected_conclusion)
    impl = task.implementation
    section("ground truth: requirements", "\n".join(f"- {r}" for r in impl.requirements))
    section("ground truth: reference files", "\n".join(impl.reference_files))
    section("ground truth: method notes", impl.method_notes)
    masking = [*task.masking.files, *(f"{f.path}::{f.qualname}" for f in task.masking.functions)]
    section("masked", "\n".join(masking))
    section(
        "expected results",
        "\n".join(f"- {m.name} = {m.value} (rtol {m.rtol}, atol {m.atol})" for m in task.expected_results),
    )
    if task.success is not None:
        section("success criterion", task.success.model_dump_json(exclude_defaults=True))
    if task.extra:
        section(
            "extra fields", ", ".join(sorted(task.extra)) + "\n(see --json --ground-truth for their values)"
        )


@app.command("validate")
def validate_cmd(
    task: Annotated[list[str] | None, typer.Option("--task", help="Task id (repeatable); default: all.")] = None,
    benchmark: Annotated[str | None, typer.Option(help="Only tasks of this benchmark.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only tasks of this kind (T1, T2, T3, masked_functions, ...).")
                    ] = None,
    paper: Annotated[list[str] | None, typer.Option("--paper", help="Only tasks of this paper id (repeatable).")
                     ] = None,
    masked: Annotated[int | None, typer.Option(
        help="Only tasks with this many masked functions (AutoExperiment's n: 0, 1, 2, ...).", min=0)] = None,
    setting: Annotated[str | None, typer.Option(help="Task setting to validate (default: each task's own).")] = None,
    sandbox: Annotated[str, typer.Option(
        help="Sandbox kind for the runs and re-runs: auto (docker where its engine answers, else bwrap), docker, "
        "bwrap or local.")] = "auto",
    image: Annotated[str | None, typer.Option(help="Sandbox image (default: the task's, else the built one).")] = None,
    repo: Annotated[Path | None, typer.Option(help="Checkout of the tasks' repository (else the repository "
                                                   "cache, else the bundled one).")] = None,
    workers: Annotated[int, typer.Option(help="Parallel runs.")] = 1,
    runs_dir: Annotated[Path | None, typer.Option(help="Workspaces folder (default: runs/ beside the store).")] = None,
    llm: Annotated[bool, typer.Option(help="Let the LLM judges score too (needs an endpoint).")] = False,
    retry_infra: Annotated[bool, typer.Option(
        help="Redo stored gold and null runs that ended in infra_error (the harness failed, not the task).")] = True,
    mutants: Annotated[int, typer.Option(
        help="Mutants of the reference's masked functions per valid task, for its mutation score (0: none).")] = 20,
    mutation_seed: Annotated[int, typer.Option(help="Seed choosing the mutants.")] = 0,
    method_mutants: Annotated[int, typer.Option(
        help="Method mutants per valid task (the task file's, then generic ones), for its method mutation score "
        "(0: none).", min=0)] = 20,
    gpus: options.Gpus = None,
    timeout: options.Timeout = None,
    network: options.Network = None,
    allow_host: options.AllowHost = None,
    data: options.Data = None,
    max_copy_mib: options.MaxCopyMib = None,
    environment: options.Environment = None,
    reference: Annotated[Path | None, typer.Option(
        help="The reference version of extension tasks' repository (a folder, or a patch against the base): "
        "kept with the task, gold restores it (RExBench gives none).")] = None,
    reference_command: Annotated[str | None, typer.Option(
        help="The command that runs the reference and prints its results, for tasks whose benchmark gives none "
        "(EXP-Bench): kept with the task; with --expected-from-reference its printed numbers are expected.")
    ] = None,
    expected_from_reference: Annotated[bool, typer.Option(
        "--expected-from-reference", help="Validate each task's variant (id <task>+ref-<hash>) whose expected values "
        "are what the reference's own command prints on the given --data (a stand-in for data that is not public), "
        "not the paper's.")] = False,
    out: Annotated[Path | None, typer.Option(help="Write task_validation.md, .csv and .json, and paper_<id>.md and "
                                               ".json per paper, to this folder.")] = None,
    as_json: Json = False,
) -> None:
    """Check the tasks themselves: prepare each, run gold and null, score both, and give each task a status
    (valid, judges-only, needs-gpu, repo-unavailable, prepare-fails, data-unavailable, env-failed, gold-fails,
    null-passes, not-checkable, infra-error). A valid task also gets two mutation scores: the share of syntax
    mutants of the reference, and of other methods (method mutants), that its checks reject, with a warning for
    each tolerance that admits a method mutant (docs/benchmarks.md). Resumable: stored runs and scores are reused."""
    import time

    from failatlas.bench_core.runs import ResourceOverrides
    from failatlas.bench_core.sandbox import resolve_sandbox_kind
    from failatlas.bench_core.task_validation import ValidateParams
    from failatlas.bench_core.task_validation import run as validate
    from failatlas.bench_core.task_validation.report import (
        counts_table,
        footprint,
        method_cell,
        mutation_cell,
        mutation_rows,
        write_report,
    )
    from failatlas.core.cli import live_progress

    s = store()
    params = ValidateParams(task_ids=task or None, benchmark=benchmark, kind=kind, papers=paper or None,
                            masked=masked, setting=setting, sandbox=sandbox,
                            image=image, repo=repo, workers=workers, runs_dir=runs_dir, llm=llm,
                            retry_infra=retry_infra, mutants=mutants, mutation_seed=mutation_seed,
                            method_mutants=method_mutants,
                            resources=ResourceOverrides(gpus=gpus, timeout_s=timeout,
                                                        environment=options.environment_mode(environment)),
                            network=network,
                            allow_hosts=allow_host or [], data=options.data_with_papers(s, data, paper),
                            max_copy_mib=max_copy_mib, expected_from_reference=expected_from_reference,
                            reference=reference, reference_command=reference_command)
    params.sandbox = resolve_sandbox_kind(sandbox, say=console.print)
    started = time.monotonic()
    with live_progress("validating tasks", None) as bar:
        def step(text: str) -> None:
            bar.describe(text[:60])
            bar.advance()

        result = validate(s, params, on_step=step, on_total=bar.total, on_note=lambda text: bar.describe(text[:60]))
    wall = time.monotonic() - started
    if as_json:
        console.print_json(json.dumps({"counts": result.counts(),
                                       "tasks": [v.model_dump() for v in result.verdicts]}))
    else:
        for v in result.verdicts:
            colour = "green" if v.status == "valid" else "yellow"
            mutation = f" · mutation score {mutation_cell(v)}" if v.mutation else ""
            mutation += f" · method mutation score {method_cell(v)}" if v.method_mutation else ""
            console.print(f"[{colour}]{v.status:>16}[/] {escape(v.task_id)}: {escape(v.reason)}{mutation}",
                          highlight=False, soft_wrap=True)
            if v.next_step:
                console.print(f"{'':>16}   next: {escape(v.next_step)}", highlight=False, soft_wrap=True)
            for survivor in v.mutation.survivors if v.mutation else []:
                console.print(f"{'':>16}   survives: {escape(survivor)}", highlight=False, soft_wrap=True)
            for same in v.mutation.equivalents if v.mutation else []:
                console.print(f"{'':>16}   equivalent (gold's values exactly): {escape(same)}", highlight=False,
                              soft_wrap=True)
            for survivor in v.method_mutation.survivors if v.method_mutation else []:
                console.print(f"{'':>16}   method survives: {escape(survivor)}", highlight=False, soft_wrap=True)
            for warning in v.method_mutation.warnings if v.method_mutation else []:
                console.print(f"[yellow]{'':>16}   warning: {escape(warning)}[/]", highlight=False, soft_wrap=True)
        m_headers, m_rows = mutation_rows(result)
        if m_rows:
            table = Table(*m_headers, title="mutation scores: syntax and method")
            for row in m_rows:
                table.add_row(*(str(c) for c in row))
            console.print(table)
        headers, rows = counts_table(result)
        table = Table(*headers, title="tasks by status")
        for row in rows:
            table.add_row(*(str(c) for c in row))
        console.print(table)
    if out is not None:
        from failatlas.bench_core.task_validation.report import write_paper_reports

        written = write_report(result, out) + write_paper_reports(result, out, wall_s=wall,
                                                                  disk=footprint(s, params))
        for path in written:
            err_console.print(f"wrote {path}", highlight=False, soft_wrap=True)

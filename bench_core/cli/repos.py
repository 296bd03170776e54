"""`failatlas repos`: get task repositories into a local cache, pinned, and list the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from failatlas.bench_core.repos import AddParams, FetchParams, add, fetch, list_repositories
from failatlas.core.cli import console, err_console, store

app = typer.Typer(no_args_is_help=True)

Tasks = Annotated[list[str] | None, typer.Option("--task", help="A task id (repeat the option for several).")]
CacheDir = Annotated[Path | None, typer.Option(
    help="The cache folder (default: repos/ beside the store).")]


def _say(text: str) -> None:
    console.print(escape(text), highlight=False, soft_wrap=True)


@app.command("add")
def add_cmd(
    source: Annotated[str, typer.Argument(
        help="A git URL or bare repository (cloned), a local checkout, a folder, or a tarball "
             "(.tar.gz, .tgz, .tar).")],
    url: Annotated[str | None, typer.Option(
        help="The repository's URL (default: the clone URL, the checkout's origin, or github.com/<owner>/<name> "
             "for a tarball <owner>__<name>.tar.gz when an imported task names it).")] = None,
    task: Tasks = None,
    commit: Annotated[str | None, typer.Option(
        help="git: the commit or tag to check out; folder or tarball: the commit its tree is (a tarball made by "
             "git archive names its own).")] = None,
    cache_dir: CacheDir = None,
    paper: Annotated[list[str] | None, typer.Option(
        "--paper", help="Every task of this paper id (repeatable): as --task for each of them.")] = None,
) -> None:
    """Copy a repository into the cache at a pinned commit and record it; tasks naming its URL use it.

    Re-adding a URL at the pinned commit changes nothing; at another commit it replaces the pin.
    """
    s = store()
    result = add(s, AddParams(source=source, url=url, task_ids=[*(task or []), *paper_tasks(s, paper)],
                              commit=commit, cache_dir=cache_dir))
    for note in result.notes:
        _say(f"note: {note}")
    _say(result.summary())


def paper_tasks(s, papers: list[str] | None) -> list[str]:  # noqa: ANN001
    """The ids of every task of `papers` (R7: one --paper instead of 36 --task); NotFoundError naming the nearest
    paper ids when one matches no task."""
    from failatlas.bench_core.tasks.catalog import list_tasks, no_match_hint
    from failatlas.core.errors import NotFoundError

    out: list[str] = []
    for paper in papers or []:
        found = [r["id"] for r in list_tasks(s, paper=paper)]
        if not found:
            raise NotFoundError(no_match_hint(s, paper=paper))
        out += found
    return out


@app.command("fetch")
def fetch_cmd(
    task: Tasks = None,
    benchmark: Annotated[str | None, typer.Option(help="Only tasks of this benchmark.")] = None,
    cache_dir: CacheDir = None,
    allow_local: Annotated[bool, typer.Option(
        "--allow-local", help="Let tasks name repositories on this machine (file:// URLs, paths).")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds one clone may take.")] = 1800.0,
) -> None:
    """Clone every repository that imported tasks name and the cache lacks, one line per repository.

    Goes on after a failure; exits with 1 when any repository failed.
    """
    params = FetchParams(task_ids=task or [], benchmark=benchmark, cache_dir=cache_dir, allow_local=allow_local,
                         timeout_s=timeout)
    result = fetch(store(), params, on_result=lambda outcome: _say(outcome.line()))
    _say(result.summary())
    if result.failed:
        raise typer.Exit(1)


@app.command("list")
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")] = False,
) -> None:
    """List the cached repositories: URL, pinned commit, bound tasks, folder."""
    rows = list_repositories(store(create=False))
    if as_json:
        console.print_json(json.dumps([r.model_dump(mode="json") for r in rows]))
        return
    if not rows:
        err_console.print("the cache is empty: add a repository with `failatlas repos add SOURCE` or "
                          "`failatlas repos fetch`")
        return
    table = Table(title=f"{len(rows)} cached repositor{'y' if len(rows) == 1 else 'ies'}")
    for column in ("url", "commit", "tasks", "path"):
        table.add_column(column, overflow="fold")
    for row in rows:
        missing = "" if row.path.is_dir() else " (missing)"
        table.add_row(escape(row.url or "-"), escape(row.commit), escape(", ".join(row.task_ids) or "-"),
                      escape(f"{row.path}{missing}"))
    console.print(table)

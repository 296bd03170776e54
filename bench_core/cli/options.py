"""Options that `bench run` and `tasks validate` share, defined once: resources, network, data inputs, the
copy-out cap."""

from __future__ import annotations

from typing import Annotated

import typer

Gpus = Annotated[int | None, typer.Option(help="Override the tasks' GPU count (the runs' and their re-runs').",
                                          min=0)]
Timeout = Annotated[int | None, typer.Option(
    help="Override the tasks' experiment time limit, in seconds (the runs' and their re-runs').", min=1)]
Network = Annotated[str | None, typer.Option(
    help="Network policy for these runs: none, registries (package indexes only, through an egress proxy) or "
    "full (never the Docker host); default: each task's.")]
AllowHost = Annotated[list[str] | None, typer.Option(
    help="A host `registries` also allows, beyond this host's pip and apt indexes (repeatable; *.domain for "
    "its subdomains).")]
Data = Annotated[list[str] | None, typer.Option(
    "--data", metavar="NAME=PATH",
    help="Mount PATH (a dataset or weights, file or folder) read-only at /data/NAME in every sandbox of the runs "
    "and their re-runs, never copied; $FAILATLAS_DATA_NAME says where it is (repeatable; docs/sandbox.md).")]
Environment = Annotated[str | None, typer.Option(
    help="Who sets up the tasks' dependencies: agent (it installs them) or prebuilt (the environment `failatlas "
    "sandbox build-env` built: an image under Docker, a venv with --venv under bwrap); default: each task's.")]
MaxCopyMib = Annotated[int | None, typer.Option(
    help="Cap, in MiB, on the working copy copied out of a sandbox after a run (default: 512); give large data "
    "with --data instead.", min=1)]



def environment_mode(value: str | None) -> str | None:
    """`--environment`'s value checked: agent, prebuilt or None; ConfigError naming the option otherwise."""
    from failatlas.core.errors import ConfigError

    if value is None or value in ("agent", "prebuilt"):
        return value
    raise ConfigError(f"--environment: {value!r} is neither agent nor prebuilt")


def data_with_papers(store, data: list[str] | None, papers: list[str] | None) -> dict:  # noqa: ANN001
    """`--data NAME=PATH` options parsed, with the data the per-paper resource file names for `papers` (recorded
    on their tasks at import, `tasks/paper_file.py`) where `--data` does not give that name."""
    from failatlas.bench_core.runs.data import parse_data_options
    from failatlas.bench_core.tasks import paper_file
    from failatlas.bench_core.tasks.catalog import get_task, list_tasks

    given = parse_data_options(data or [])
    if papers:
        tasks = [get_task(store, row["id"]) for row in list_tasks(store, paper=list(papers))]
        for name, path in paper_file.data_of(tasks).items():
            given.setdefault(name, path)
    return given

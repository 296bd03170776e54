"""Bundled task suites: one folder per task holding task.yaml, repo/ and hidden_tests/ (read by the `failatlas`
task importer, `bench_core.tasks.importers.suite`)."""

from __future__ import annotations

from pathlib import Path

from failatlas.bench_core.tasks.importers.suite import TASK_FILE, load_task
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import NotFoundError

SUITES: dict[str, Path] = {
    "failatlas-mini": Path(__file__).resolve().parent / "mini",
    # tasks whose environment must be set up through the network (registries policy): kept apart from the mini
    # suite, whose runs need no network
    "failatlas-env": Path(__file__).resolve().parent / "env",
}


def suite_names() -> list[str]:
    """Names of the bundled suites."""
    return sorted(SUITES)


def suite_dir(name: str) -> Path:
    """The folder of suite `name`; raises NotFoundError for an unknown name."""
    if name not in SUITES:
        raise NotFoundError(f"no bundled suite named {name!r}",
                            hint=f"choose one of: {', '.join(suite_names())}")
    return SUITES[name]


def load_suite(name: str = "failatlas-mini") -> list[TaskSpec]:
    """Every task of the bundled suite `name`, in folder order. Raises NotFoundError for an unknown suite."""
    return [load_task(task_file) for task_file in sorted(suite_dir(name).glob(f"*/{TASK_FILE}"))]

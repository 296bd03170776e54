"""Paths a task file names (hidden tests, reference files, environment specs), kept inside the task's folder.

Below both `prepare` and `sandbox`, which read such paths, so neither imports the other for it."""

from __future__ import annotations

from pathlib import Path

from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError

__all__ = ["task_path"]


def task_path(task: TaskSpec, path: str, *, field: str | None = None) -> Path:
    """A path from the task spec: absolute as given, else relative to the task file's folder (or the cwd).

    A task read from a file (`task.source` set) may only name paths inside that file's folder, links followed:
    InputError naming `field` otherwise, so no task file hands a host file to a sandbox, an agent or a judge.
    """
    candidate = Path(path)
    if not task.source:
        return candidate
    folder = Path(task.source).parent.resolve()
    if not candidate.is_absolute():
        candidate = folder / candidate
    resolved = candidate.resolve()
    if resolved != folder and not resolved.is_relative_to(folder):
        raise InputError(f"task {task.id}: {path!r} leads outside the task folder {folder}", path=task.source,
                         field=field)
    return candidate

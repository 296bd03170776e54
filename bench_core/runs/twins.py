"""`bench run --impossible`: the impossible twins of the selected tasks (`tasks/twins.py`), made beside the store
and saved in the catalog, so runs and scoring read them as any task."""

from __future__ import annotations

from pathlib import Path

from failatlas.bench_core.repos import repository_for
from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.bench_core.tasks.twins import is_twin, write_twin
from failatlas.core.errors import InputError, NotFoundError
from failatlas.core.store import Store


def twins_folder(store: Store) -> Path:
    """Where the twins' folders live: `twins/` beside the store."""
    return store.path.resolve().parent / "twins"


def impossible_twins(store: Store, tasks: list[TaskSpec]) -> tuple[list[TaskSpec], list[str]]:
    """The twin of each of `tasks` (a twin stays itself), each from the task's cached repository, else its bundled
    one, saved in the catalog; and "task: reason" for each task that has none. Raises NotFoundError when none
    has one."""
    twins, notes = [], []
    for task in tasks:
        if is_twin(task):
            twins.append(task)
            continue
        cached = repository_for(store, task)
        try:
            twins.append(write_twin(task, twins_folder(store), repo=Path(cached.path) if cached else None))
        except InputError as exc:
            notes.append(f"{task.id}: no impossible twin: {exc.one_line()}")
    if not twins:
        raise NotFoundError("no selected task has an impossible twin", hint="; ".join(notes[:3]) or None)
    save_tasks(store, twins, source="impossible twins")
    return twins, notes

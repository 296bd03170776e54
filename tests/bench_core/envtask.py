"""The environment task (`failatlas-env`'s env-typo-similarity) in a fresh store, for the environment tests."""

from __future__ import annotations

from pathlib import Path

from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.store import Store

TASK = "env-typo-similarity"


def env_task_store(folder: Path, *, prebuilt: bool = True) -> Store:
    """A store in `folder` holding the environment task, whose runs start from its built environment when
    `prebuilt` (else the agent sets it up, as the task file says)."""
    from failatlas.store import open_store

    store = open_store(Path(folder) / "store.duckdb")
    [task] = load_suite("failatlas-env")
    if prebuilt:
        task = task.model_copy(update={"resources": task.resources.model_copy(update={"environment": "prebuilt"})})
    save_tasks(store, [task], source="failatlas-env")
    return store

"""`tasks validate` records each task's derived tests ahead of scoring (`scoring/derived.py`): the reference
command runs once per task and reference tree, in a sandbox of the validation's kind and image, and the recording
is stored under the store's folder, so that scoring (gold's and null's runs just after, every later run) reads it
instead of running the reference again."""

from __future__ import annotations

import contextlib
from pathlib import Path

from failatlas.bench_core.runs.data import task_data
from failatlas.bench_core.runs.inputs import repository_of
from failatlas.bench_core.scoring.derived import cache_folder, ensure_recordings, recordable, reference_tree
from failatlas.bench_core.task_validation.model import ValidateParams
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.store import Store


def _starter(task: TaskSpec, params: ValidateParams, *, environment: dict | None = None):
    """A context manager over `tree`: a sandbox of the validation's kind for `task`'s reference run, with its data,
    its leased GPUs and its environment (`environment_of`: the image, or the venv, its runs get)."""
    from failatlas.bench_core.sandbox import GpuAllocator, create_sandbox, spec_for_task

    @contextlib.contextmanager
    def start(tree: Path):
        lease = GpuAllocator().lease(task.resources.gpus, owner=f"record-{task.id}", wait_s=3600) \
            if task.resources.gpus > 0 else None
        try:
            data, _missing = task_data(task, params.data)  # a task missing its data is not run: none to record
            spec = spec_for_task(task, run_id=f"record-{task.id}", gpu_ids=list(lease.ids) if lease else [],
                                 memory_mb=max(2048, int(task.resources.memory_gb * 1024)),
                                 labels={"failatlas.task_id": task.id, "failatlas.purpose": "record"},
                                 data={name: str(path) for name, path in data.items()}, **(environment or {}))
            with create_sandbox(params.sandbox, spec, workspace=tree) as sandbox:
                yield sandbox
        finally:
            if lease is not None:
                lease.release()

    return start


def record_derived_tests(store: Store, tasks: list[TaskSpec], params: ValidateParams) -> dict[str, str]:
    """Make (or find) the derived-test recording of every task that can have one; task id -> a one-line status
    (kept in the stage run's summary). A task whose recording cannot be made is reported there, and scoring tries
    again on first need."""
    from failatlas.bench_core.repos import repository_for

    references: dict[str, Path] = {}
    for task in tasks:
        if recordable(task) is None:
            cached = None if params.repo is not None else repository_for(store, task)
            used = repository_of(task, repo=params.repo, cached=cached)
            tree = reference_tree(task, used.path) if used is not None else None
            if tree is not None:
                references[task.id] = tree
    return ensure_recordings(tasks, references,
                             lambda task: _starter(task, params, environment=environment_of(store, task, params)),
                             folder=cache_folder(store))


def environment_of(store: Store, task: TaskSpec, params: ValidateParams) -> dict:
    """The sandbox fields of the environment `task`'s validation sandboxes get, by runs/execute.py's rule: the
    image named (`--image`, the task's), else for a `prebuilt` task its venv under bwrap or its environment image
    elsewhere, else nothing (the base image). SandboxError naming the build command when it is not built."""
    from failatlas.bench_core.repos import repository_for
    from failatlas.bench_core.runs.execute import repository_path

    if params.image or task.resources.image:
        return {"image": params.image or task.resources.image}
    if task.resources.environment != "prebuilt":
        return {}
    cached = None if params.repo is not None else repository_for(store, task)
    path = repository_path(task, repository_of(task, repo=params.repo, cached=cached))
    if params.sandbox == "bwrap":
        from failatlas.bench_core.sandbox.venvs import env_root, task_venv

        return {"env_dir": str(task_venv(task, path, env_root(store.path)))}
    from failatlas.bench_core.sandbox.envbuild import prebuilt_image

    return {"image": prebuilt_image(task, path)}

"""`tasks validate` records each task's derived tests ahead of scoring (`scoring/evidence/recording.py`): the reference
command runs once per task and reference tree, in a sandbox of the validation's kind and image, and the recording
is stored under the store's folder, so that scoring (gold's and null's runs just after, every later run) reads it
instead of running the reference again."""

from __future__ import annotations

import contextlib
from pathlib import Path

from failatlas.bench_core.hidden.record import Recording
from failatlas.bench_core.runs.data import task_data
from failatlas.bench_core.runs.inputs import repository_of
from failatlas.bench_core.scoring.evidence.recording import cache_folder, ensure_recordings, recordable, reference_tree
from failatlas.bench_core.task_validation.model import ValidateParams
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import FailAtlasError
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
    start = lambda task: _starter(task, params, environment=environment_of(store, task, params))  # noqa: E731
    shared = paper_recordings(tasks, references, start, folder=cache_folder(store))
    rest = ensure_recordings([t for t in tasks if t.id not in shared], references, start, folder=cache_folder(store))
    return {**shared, **rest}


def _split(union: Recording, targets: list[dict]) -> Recording:
    """The part of a recording of several tasks' functions (`union.targets`) that is about `targets`: their cases,
    each pointing at its index in `targets`."""
    index = {i: targets.index(t) for i, t in enumerate(union.targets) if t in targets}
    cases = [{**c, "t": index[c["t"]]} for c in union.cases if c["t"] in index]
    return Recording(targets=targets, cases=cases, calls_seen=len(cases), skipped=dict(union.skipped),
                     unreproducible=union.unreproducible, exit_code=union.exit_code,
                     notes=[*union.notes, f"recorded once for the {len(union.targets)} functions of the tasks that "
                            "share this reference and command"])


def paper_recordings(tasks: list[TaskSpec], references: dict[str, Path], start, *,
                     folder: Path | None) -> dict[str, str]:
    """One recording per reference tree and command (issue 52: a paper's 36 tasks share both): the reference runs
    once with every masked function of those tasks recorded and its cases are checked once on an unrun copy;
    each task then keeps its own functions' cases, drops those its own masked stubs pass, and is stored under its
    own key, where scoring looks. Groups of one task, and tasks whose recording is stored, are left to
    `ensure_recordings`; task id -> a one-line status for the tasks done here."""
    import tempfile

    from failatlas.bench_core.hidden.record import drop_stub_passes, record_calls, self_check
    from failatlas.bench_core.prepare import prepare_workspace, reference_workspace
    from failatlas.bench_core.scoring.evidence.recording import (
        load_recording,
        recording_key,
        save_recording,
        targets_of,
    )

    groups: dict[tuple, list[tuple[TaskSpec, list[dict], str]]] = {}
    for task in tasks:
        reference = references.get(task.id)
        if recordable(task) or reference is None:
            continue
        targets, _notes = targets_of(task, reference)
        key = recording_key(task, reference, targets)
        if not targets or load_recording(folder, key) is not None:
            continue
        group = (str(reference), task.run.command, task.run.timeout_s, task.resources.environment,
                 tuple(sorted(task.data)))
        groups.setdefault(group, []).append((task, targets, key))
    out: dict[str, str] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        first = members[0][0]
        union = [t for _task, targets, _key in members for t in targets]
        union = [t for i, t in enumerate(union) if t not in union[:i]]
        reference = references[first.id]
        timeout = float(first.run.timeout_s)
        try:
            with tempfile.TemporaryDirectory(prefix="failatlas-record-paper-") as tmp:
                tree = reference_workspace(first, Path(tmp) / "reference", repo=reference)
                with start(first)(tree) as sandbox:
                    whole = record_calls(sandbox, command=first.run.command or "", targets=union, timeout_s=timeout)
                if whole.cases:
                    fresh = reference_workspace(first, Path(tmp) / "reference-check", repo=reference)
                    with start(first)(fresh) as sandbox:
                        whole = self_check(whole, sandbox, timeout_s=max(60.0, timeout))
                for task, targets, key in members:
                    mine = _split(whole, targets)
                    if mine.cases:
                        masked = Path(prepare_workspace(task, Path(tmp) / f"masked-{len(out)}", repo=reference).path)
                        with start(task)(masked) as sandbox:
                            mine = drop_stub_passes(mine, sandbox, timeout_s=max(60.0, timeout))
                    save_recording(folder, key, mine)
                    out[task.id] = (f"recorded with its paper ({len(members)} tasks, one reference run): "
                                    f"{len(mine.cases)} case(s), {mine.perturbed} perturbed")
        except (OSError, LookupError, FailAtlasError):  # each task is then recorded alone (ensure_recordings)
            for task, _targets, _key in members:
                out.pop(task.id, None)
    return out


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

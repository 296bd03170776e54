"""The reference's recorded calls of the masked functions: the trusted half of the derived tests (the replay is
`replay.py`, the verdict `checks/derived_tests.py`), for every task with masked functions whose reference command
runs, hand-written hidden tests or not (AutoExperiment, EXP-Bench, RExBench have none).

Record (trusted, `hidden.record`): the task's reference command runs on a copy of the task's repository, unmasked,
in a sandbox of the run's kind and limits, with the recorder installed; the calls the reference itself reproduces
in a fresh process are kept. The same recording tells E's re-run which functions to observe (`watch_of`).

Recordings are stored as content-addressed files, `<store folder>/derived-tests/<key>.wire`, written atomically
(a temporary file, then `os.replace`), keyed by `recording_key`: the reference tree's content, the command, the
masked functions, the limits and RECORDER_VERSION. A file rather than a table because scoring threads only read
the store (docs/ARCHITECTURE.md, "Concurrency") yet a missing recording is made on first need inside them: a file
needs no write connection, two threads that make the same recording write the same bytes, and a recording is up
to megabytes of array data. Within this process one lock per key makes a recording once. `tasks validate` makes
them ahead (`ensure_recordings`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from failatlas.bench_core.hidden import JudgeError
from failatlas.bench_core.hidden.observe import SAMPLE_SLOTS, Watch
from failatlas.bench_core.hidden.record import (
    RECORDER_VERSION,
    Limits,
    Recording,
    drop_stub_passes,
    record_calls,
    self_check,
)
from failatlas.bench_core.hidden.wire import WireError
from failatlas.bench_core.prepare import prepare_workspace, reference_workspace, source_tree
from failatlas.bench_core.prepare.stubs import StubError, StubTarget, locate, parse_python
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import AgentFaultError, InfrastructureError, InputError
from failatlas.core.paths import inside

CACHE_FOLDER = "derived-tests"
LIMITS = Limits()
FULL_HASH_BYTES = 16 << 20  # larger files are keyed by their size, first and last MiB
_SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints"})
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
_MEMORY: dict[str, bytes] = {}  # recordings of a process without a store folder

StartTree = Callable[[Path], Any]


def targets_of(task: TaskSpec, reference: Path) -> tuple[list[dict], list[str]]:
    """The masked functions as recorder targets (`path`, real `qualname`: definitions given by their lines are
    located in the reference), and a note for each that cannot be located."""
    targets: list[dict] = []
    notes: list[str] = []
    for ref in task.masking.functions:
        if ref.line_start is None:
            item = {"path": ref.path, "qualname": ref.qualname}
            if item not in targets:
                targets.append(item)
            continue
        try:
            source = inside(reference, ref.path, field="masking.functions").read_text(errors="replace")
            found, _note = locate(parse_python(source, ref.path), StubTarget(ref.qualname, ref.line_start,
                                                                           ref.line_end), ref.path)
        except (OSError, StubError, SyntaxError, ValueError, RecursionError) as exc:
            notes.append(f"{ref.path}::{ref.qualname}: not located ({str(exc)[:120]})")
            continue
        for qualname, _node in found:
            item = {"path": ref.path, "qualname": qualname}
            if item not in targets:
                targets.append(item)
    return targets, notes


def _file_digest(path: Path) -> bytes:
    size = path.stat().st_size
    content = hashlib.sha256(str(size).encode())
    with open(path, "rb") as handle:
        if size <= FULL_HASH_BYTES:
            content.update(handle.read())
        else:  # a data file of gigabytes is keyed by its size, head and tail, not read whole at every scoring
            content.update(handle.read(1 << 20))
            handle.seek(size - (1 << 20))
            content.update(handle.read(1 << 20))
    return content.digest()


def tree_digest(tree: Path) -> str:
    """A content hash of the reference tree (paths, bytes, link targets; caches and `.git` left out). Unlike
    `counterfactual.tree_digest` it has no size cap: a recording's key must exist for every reference."""
    digest = hashlib.sha256()
    paths = sorted(p for p in tree.rglob("*") if not _SKIP_DIRS.intersection(p.relative_to(tree).parts)
                   and not p.name.endswith((".pyc", ".pyo")))
    for path in paths:
        rel = str(path.relative_to(tree)).encode("utf-8", "surrogateescape")
        if path.is_symlink():
            digest.update(b"L\0" + rel + b"\0" + os.readlink(path).encode("utf-8", "surrogateescape") + b"\0")
        elif path.is_file():
            digest.update(b"F\0" + rel + b"\0" + _file_digest(path))
    return digest.hexdigest()


def recording_key(task: TaskSpec, reference: Path, targets: list[dict], limits: Limits = LIMITS) -> str:
    """The content address of a recording: reference tree, command, targets, limits, recorder version."""
    meta = json.dumps({"version": RECORDER_VERSION, "command": task.run.command, "targets": targets,
                       "limits": limits.__dict__, "tree": tree_digest(reference)}, sort_keys=True)
    return hashlib.sha256(meta.encode()).hexdigest()


def cache_folder(store) -> Path | None:
    """Where recordings of this store live (None: the store has no folder; recordings stay in this process)."""
    path = getattr(store, "path", None)
    return Path(path).resolve().parent / CACHE_FOLDER if path is not None else None


def load_recording(folder: Path | None, key: str) -> Recording | None:
    """The stored recording `key`, None when there is none (or it is unreadable, or of another version)."""
    data = _MEMORY.get(key)
    if data is None and folder is not None:
        with contextlib.suppress(OSError):
            data = (folder / f"{key}.wire").read_bytes()
    if data is None:
        return None
    try:
        return Recording.from_bytes(data)
    except (WireError, ValueError, TypeError):
        return None


def save_recording(folder: Path | None, key: str, recording: Recording) -> None:
    """Store `recording` under `key`, atomically (a reader sees the whole file or none)."""
    data = recording.to_bytes()
    if folder is None:
        _MEMORY[key] = data
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{key}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, folder / f"{key}.wire")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _lock(key: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def make_recording(task: TaskSpec, reference: Path, targets: list[dict], start: StartTree,
                   limits: Limits = LIMITS) -> Recording:
    """Record the reference's calls in a fresh sandbox (`start(tree)`) holding a copy of `reference`, and keep
    those an unrun copy of it reproduces in another fresh sandbox (as a judge's is) and the masked stubs do not
    pass (the masked repository in a third).
    Raises InfrastructureError when a sandbox or the judge fails."""
    try:
        return _record(task, reference, targets, start, limits)
    except AgentFaultError as exc:  # only the reference's code and the stubs ran here: never an agent's fault
        raise JudgeError(f"recording the reference's calls failed: {exc}") from exc


def _record(task: TaskSpec, reference: Path, targets: list[dict], start: StartTree, limits: Limits) -> Recording:
    with tempfile.TemporaryDirectory(prefix="failatlas-record-") as tmp:
        tree = reference_workspace(task, Path(tmp) / "reference", repo=reference)
        timeout = float(task.run.timeout_s)
        with start(tree) as sandbox:
            recording = record_calls(sandbox, command=task.run.command or "", targets=targets, timeout_s=timeout,
                                     limits=limits)
        if recording.cases:
            # reproduced where a judge replays them: a fresh sandbox on an unrun copy of the reference, so nothing
            # the run command left behind (packages it installed, files it wrote) makes a case pass here that a
            # judge's sandbox cannot pass (the run's side effects are not the environment)
            fresh = reference_workspace(task, Path(tmp) / "reference-check", repo=reference)
            with start(fresh) as sandbox:
                recording = self_check(recording, sandbox, timeout_s=max(60.0, timeout))
        if recording.cases:
            masked = Path(prepare_workspace(task, Path(tmp) / "masked", repo=reference).path)
            with start(masked) as sandbox:
                recording = drop_stub_passes(recording, sandbox, timeout_s=max(60.0, timeout))
        return recording


def _usable(found: Recording | None, redo_failed: bool) -> bool:
    return found is not None and not (redo_failed and not found.cases and found.exit_code != 0)


def ensure_recording(task: TaskSpec, reference: Path, start: StartTree, *, folder: Path | None,
                     limits: Limits = LIMITS, redo_failed: bool = False) -> tuple[str, Recording, bool]:
    """The task's recording (key, recording, whether it was made now): read from `folder`, else made with
    `start` and stored there. `redo_failed`: a stored recording without cases whose reference command failed (a
    dataset or package the environment lacked then) is made again. Raises InfrastructureError when it cannot be
    made."""
    targets, notes = targets_of(task, reference)
    key = recording_key(task, reference, targets, limits)
    found = load_recording(folder, key)
    if _usable(found, redo_failed):
        return key, found, False
    with _lock(key):
        found = load_recording(folder, key)
        if _usable(found, redo_failed):
            return key, found, False
        recording = make_recording(task, reference, targets, start, limits) if targets else Recording(targets=[])
        recording.notes[:0] = notes
        save_recording(folder, key, recording)
        return key, recording, True


def reference_tree(task: TaskSpec, repository: Path | None) -> Path | None:
    """The reference tree to record from: the repository scoring resolved, else the task's bundled folder (which
    scoring leaves as None); None when neither is there."""
    try:
        return source_tree(task, repository)
    except InputError:
        return None


def recordable(task: TaskSpec) -> str | None:
    """Why the task gets no derived tests (None: it can): no masked function, no reference command."""
    if "implementation" not in task.judgeable_phases:
        return "the task has no implementation phase"
    if not task.masking.functions:
        return "the task masks no functions, so there is nothing to record"
    if not task.run.command:
        return "the task has no reference command to record the masked functions' calls from"
    return None


def reference_starter(sandbox) -> StartTree:
    """A starter of sandboxes like `sandbox` (its kind and limits), each from the tree given."""
    from failatlas.bench_core.sandbox import create_sandbox

    spec = sandbox.spec.model_copy(update={
        "run_id": f"{sandbox.spec.run_id or 'derived'}-record", "read_only_inputs": {},
        "labels": {**sandbox.spec.labels, "failatlas.purpose": "record"}})
    return lambda tree: create_sandbox(sandbox.backend, spec, workspace=tree)


def key_of(task: TaskSpec, reference: Path, memo: dict | None) -> str:
    """The recording key of `task` (the reference is hashed once per scoring batch)."""
    ref_key = ("derived-tests", "reference", task.id, str(reference))
    if memo is not None and ref_key in memo:
        return memo[ref_key]
    key = recording_key(task, reference, targets_of(task, reference)[0])
    if memo is not None:
        memo[ref_key] = key
    return key


def watch_of(task: TaskSpec, reference: Path | None, start: StartTree, *, folder: Path | None,
             memo: dict | None = None) -> Watch | None:
    """What E's re-run observes (`hidden.observe`): the masked functions of the task's recording, made with
    `start` on first need; None when the task gets no derived tests, no call could be recorded, or the recording
    cannot be made now (the judge then tries again and says why)."""
    if recordable(task) or reference is None:
        return None
    key = key_of(task, reference, memo)
    recording = load_recording(folder, key)
    if recording is None:
        try:
            _key_made, recording, _made = ensure_recording(task, reference, start, folder=folder)
        except (OSError, LookupError, InfrastructureError):
            return None
    if not any(not c["perturbed"] for c in recording.cases):
        return None
    keys: dict[str, list[str]] = {}
    for case in recording.cases:  # an instance's attributes the reference's calls had, before and after: what is
        if case["kind"] != "method":  # recorded of the run's
            continue
        have = set(keys.get(str(case["t"]), []))
        for part in ("state", "after"):
            if isinstance(case.get(part), dict):
                have |= set(case[part])
        keys[str(case["t"])] = sorted(have)
    return Watch(recording.targets, LIMITS, sample=SAMPLE_SLOTS, state_keys=keys)


def ensure_recordings(tasks: list[TaskSpec], references: dict[str, Path], start: Callable[[TaskSpec], StartTree],
                      *, folder: Path | None) -> dict[str, str]:
    """Make (or find) the recording of each task that can have one (one stored without cases after its reference
    command failed is made again); task id -> a one-line status. A task whose recording cannot be made (the sandbox
    fails) is reported, and scoring tries again on first need."""
    out: dict[str, str] = {}
    for task in tasks:
        reference = references.get(task.id)
        if recordable(task) or reference is None:
            continue
        try:
            _key, recording, made = ensure_recording(task, reference, start(task), folder=folder, redo_failed=True)
        except (OSError, LookupError, InfrastructureError) as exc:
            out[task.id] = f"not recorded: {str(exc)[:200]}"
            continue
        out[task.id] = (f"{'recorded' if made else 'stored'}: {len(recording.cases)} case(s), "
                        f"{recording.perturbed} perturbed, {recording.unencodable} call(s) not plain data"
                        + (f"; {recording.notes[0]}" if not recording.cases and recording.notes else ""))
    return out

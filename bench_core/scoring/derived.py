"""The `derived-tests` judge: hidden tests derived from the reference, for every task with masked functions whose
reference command runs, hand-written hidden tests or not (AutoExperiment, EXP-Bench, RExBench have none).

Two steps. Record (trusted, `hidden.record`): the task's reference command runs on a copy of the task's
repository, unmasked (`JudgeInput.repository`), in a sandbox of the run's kind and limits, with the recorder
installed; the calls the reference itself reproduces in a fresh process are kept. Replay: those calls become a
hidden-test file that `hidden.run_judge` runs exactly as the hand-written ones run, on the tree `start_sandbox`
starts: the judge process on the host never imports the agent's code, each call runs in a fresh worker in the
run's sandbox, only plain data comes back, and the comparison happens on the host.

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
import copy
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from failatlas.bench_core.hidden import JudgeError, JudgeRun
from failatlas.bench_core.hidden.observe import Agreement, Watch, agreement
from failatlas.bench_core.hidden.record import (
    RECORDER_VERSION,
    Limits,
    Recording,
    drop_stub_passes,
    record_calls,
    replay,
    replay_timeout,
    self_check,
    test_id,
)
from failatlas.bench_core.hidden.wire import WireError
from failatlas.bench_core.prepare import prepare_workspace, reference_workspace, source_tree
from failatlas.bench_core.prepare.stubs import StubError, StubTarget, locate, parse_python
from failatlas.bench_core.scoring.judges import JUDGES, JudgeInput, JudgeOptions, Verdict
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import AgentFaultError, InfrastructureError, InputError
from failatlas.core.paths import inside

NAME = "derived-tests"
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


def _not_run(reason: str, **verdict) -> Verdict:
    return Verdict("implementation", NAME, status="not_run", reason=reason, verdict=verdict)


def _counts(recording: Recording) -> dict:
    return {"recorded": len(recording.cases) - recording.perturbed, "perturbed": recording.perturbed,
            "skipped_unencodable": recording.unencodable, "skipped": dict(recording.skipped),
            "unreproducible": recording.unreproducible, "stub_passes": recording.stub_passes,
            "calls_seen": recording.calls_seen}


def verdict_of(recording: Recording, key: str, run: JudgeRun, in_run: Agreement | str = "") -> Verdict:
    """The verdict of one replay and of E's observed re-run (`in_run`: how its calls agree with the reference's,
    or why they were not checked): passed only when every case matched and the run's calls agree; the score is
    the share of replayed and observed calls that gave the reference's results."""
    cases = {c["id"]: c for c in recording.cases}
    passed = {test_id(n) for n in run.passed} & set(cases)
    functions: dict[str, dict] = {}
    for case in recording.cases:
        row = functions.setdefault(case["qualname"], {"cases": 0, "matched": 0, "first_failure": None})
        row["cases"] += 1
        row["matched"] += case["id"] in passed
    for failure in run.failures:
        case = cases.get(test_id(failure["test"]) or "")
        row = functions.get(case["qualname"]) if case else None
        if row is not None and row["first_failure"] is None:
            where = f" in {failure['object']}" if failure.get("object") else ""
            text = failure.get("message") or ""
            row["first_failure"] = (text if failure["exception"] == "AssertionError"
                                    else f"{failure['exception']}{where}: {text}".rstrip(": "))[:300]
    total = len(recording.cases)
    ok = run.ok and len(passed) == total
    agreed, checked = len(passed), total
    sentences = []
    for name, row in functions.items():
        if row["matched"] < row["cases"]:
            first = f"; first difference: {row['first_failure']}" if row["first_failure"] else ""
            sentences.append(f"Derived tests of {name}: {row['matched']} of {row['cases']} calls recorded from the "
                             f"reference give the reference's result{first}.")
    sentences += [p[0].upper() + p[1:] + "." for p in run.problems]
    if isinstance(in_run, Agreement):
        failures = in_run.failures()
        ok = ok and not failures
        sentences += [f"{text}." for text in failures]
        agreed, checked = agreed + in_run.agreed, checked + in_run.checked
    score = agreed / checked if checked else 0.0
    verdict = {"recording": key, "cases": total, "matched": len(passed), **_counts(recording),
               "functions": functions, "failures": run.failures[:50], "calls": run.calls,
               "in_run": in_run.summary() if isinstance(in_run, Agreement) else {"checked": False, "reason": in_run}}
    if run.problems:
        verdict["problems"] = run.problems
    return Verdict("implementation", NAME, score=score, passed=ok, verdict=verdict, error_analysis=" ".join(sentences))


def _reference_starter(sandbox) -> StartTree:
    """A starter of sandboxes like `sandbox` (its kind and limits), each from the tree given."""
    from failatlas.bench_core.sandbox import create_sandbox

    spec = sandbox.spec.model_copy(update={
        "run_id": f"{sandbox.spec.run_id or 'derived'}-record", "read_only_inputs": {},
        "labels": {**sandbox.spec.labels, "failatlas.purpose": "record"}})
    return lambda tree: create_sandbox(sandbox.backend, spec, workspace=tree)


def _key(task: TaskSpec, reference: Path, memo: dict | None) -> str:
    """The recording key of `task` (the reference is hashed once per scoring batch)."""
    ref_key = (NAME, "reference", task.id, str(reference))
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
    key = _key(task, reference, memo)
    recording = load_recording(folder, key)
    if recording is None:
        try:
            _key_made, recording, _made = ensure_recording(task, reference, start, folder=folder)
        except (OSError, LookupError, InfrastructureError):
            return None
    return Watch(recording.targets, LIMITS) if any(not c["perturbed"] for c in recording.cases) else None


def in_run(recording: Recording, validation) -> Agreement | str:
    """How E's re-run (`validation`) agrees with the reference's recorded calls, or why that was not checked."""
    if validation is None:
        return "the task has no execution phase, so no run of its command was observed"
    if (validation.evidence or {}).get("tree") == "script":
        return "E re-ran the agent's own script, whose calls are not the reference's"
    if validation.observed is None:
        return (f"E's re-run ({validation.outcome}) was not observed: it did not run the task's command, or no "
                "recording of the reference's calls could be made before it ran")
    if not any(not c["perturbed"] for c in recording.cases):
        return "only perturbed calls of the reference were kept, and a run makes none of those"
    return agreement(recording.cases, validation.observed)


def judge_derived(task: TaskSpec, start_sandbox, reference: Path | None, *, folder: Path | None,
                  validation=None) -> Verdict:
    """Replay the reference's recorded calls on the tree `start_sandbox` starts (None: the agent's changes did not
    apply), and compare the calls E's re-run (`validation`) observed with them (`in_run`); the recording is read
    from `folder`, or made from `reference` on first need. Raises InfrastructureError (SandboxError, JudgeError)
    when a sandbox or the judge fails before the agent's code ran."""
    why = recordable(task)
    if why:
        return _not_run(why)
    if reference is None:
        return _not_run("no reference tree to record the masked functions' calls from")
    if start_sandbox is None:
        return Verdict("implementation", NAME, score=0.0, passed=False,
                       error_analysis="The agent's changes could not be applied, so no derived test could run.")
    memo, tree = getattr(start_sandbox, "memo", None), getattr(start_sandbox, "tree", None)
    key = _key(task, reference, memo)
    recording = load_recording(folder, key)
    memo_key = None
    if memo is not None and tree is not None and recording is not None:
        from failatlas.bench_core.scoring.counterfactual import tree_digest as judged_digest

        digest = judged_digest(Path(tree))
        memo_key = (NAME, task.id, key, digest) if digest else None
        if memo_key in memo:  # the same tree replayed earlier in this batch; its run is observed anew
            return verdict_of(recording, key, copy.deepcopy(memo[memo_key]), in_run(recording, validation))
    with start_sandbox({}) as sandbox:
        if recording is None:
            key, recording, _made = ensure_recording(task, reference, _reference_starter(sandbox), folder=folder)
        if not recording.cases:
            reason = "no call of a masked function could be recorded and reproduced from the reference"
            detail = "; ".join(recording.notes[:3])
            return _not_run(f"{reason}: {detail}" if detail else reason, recording=key, **_counts(recording))
        run = replay(recording.cases, sandbox,
                     timeout_s=replay_timeout(recording.cases, max(60.0, float(task.run.timeout_s))))
    if memo_key is not None and not run.problems:
        memo[memo_key] = copy.deepcopy(run)
    return verdict_of(recording, key, run, in_run(recording, validation))


@JUDGES.register(NAME)
class DerivedTestsJudge:
    """Hidden tests derived from the reference's recorded calls (module docstring); runs where scoring prepared
    the clean tree, in a fresh sandbox of its own."""

    name = NAME
    kind = "offline"
    needs_sandbox = True

    def __init__(self, options: JudgeOptions | None = None) -> None:
        self.options = options

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if not inp.validated or "implementation" not in inp.task.judgeable_phases:
            return []
        folder = cache_folder(self.options.store if self.options else None)
        for attempt in range(2):  # the agent's code broke its sandbox (AgentFaultError): once more in a fresh one
            try:
                return [judge_derived(inp.task, inp.start_sandbox, reference_tree(inp.task, inp.repository),
                                      folder=folder, validation=inp.validation)]
            except AgentFaultError as exc:  # then its failure, never judge_failed
                if attempt:
                    return [Verdict("implementation", NAME, score=0.0, passed=False,
                                    verdict={"passed": 0, "total": 1, "problems": [str(exc)]},
                                    error_analysis=f"The derived tests could not run to the end: {exc}.")]
            except (OSError, LookupError, InfrastructureError) as exc:
                return [Verdict("implementation", NAME, status="judge_failed",
                                reason=f"derived tests could not run: {exc}")]
        raise AssertionError("unreachable")


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

"""Expected values from the reference's own run, for a task given data other than the paper's (issue 40).

A real task whose data is not public (AutoExperiment's MovieLens for 2205.00048) can still be run end to end on a
stand-in of the same format (`--data NAME=PATH`), but its expected values are the paper's, measured on the real
data: no run on the stand-in can match them, gold included. `tasks validate --expected-from-reference` then makes
a variant of the task whose expected values are what the reference's own command prints on the given data, read
by name from the answer it prints (`answers.printed_answer`: a JSON or Python-literal dict per `Experiment N`
section); a metric the reference does not print by name cannot be had, and the task is validated as it is, with
the reason noted. The variant is a task of its own, `<task>+ref-<8 hex>` (the hash covers the task and the data's
fingerprints), stored in the catalog with where its values came from (`extra.expected_from_reference`: the task it
was made from, each data input's fingerprint, the command's exit and seconds), so its runs and scores never mix
with the paper-valued task's, and a later `bench run --task <variant>` must be given the same data: it is checked
against those fingerprints (`runs.data.valued_on_problem`).

What this checks, and what it cannot: gold passes only if the tree the harness constructs from gold's masked code
reproduces the reference's numbers within each metric's tolerance (the transplant and the run's determinism), and
null fails unless the stubs give the same numbers; whether the method reproduces the *paper* is not checked.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from failatlas.bench_core.runs.data import VALUED_ON_KEY as KEY
from failatlas.bench_core.runs.data import DataInput, fingerprints
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InfrastructureError

SUFFIX = "+ref-"
USER_RTOL = 0.05  # a value the user's reference command printed (no benchmark tolerance): AutoExperiment's default


def variant_id(task: TaskSpec, data: Mapping[str, DataInput]) -> str:
    """The id of `task`'s variant valued on `data`."""
    body = {"task": task.id, "data": {name: d.model_dump(exclude={"path"}) for name, d in sorted(data.items())}}
    return f"{task.id}{SUFFIX}{hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]}"


def is_variant(task: TaskSpec) -> bool:
    return isinstance(task.extra.get(KEY), dict)


def variant(task: TaskSpec, values: Mapping[str, float], data: Mapping[str, DataInput], *,
            exit_code: int, seconds: float) -> TaskSpec:
    """`task` with its expected values replaced by `values` (every expected metric's), valued on `data`."""
    from failatlas.bench_core.tasks.model import ExpectedMetric

    expected = ([m.model_copy(update={"value": float(values[m.name])}) for m in task.expected_results]
                or [ExpectedMetric(name=name, value=float(v), rtol=USER_RTOL) for name, v in sorted(values.items())])
    made = {"of": task.id, "data": {name: d.model_dump(exclude={"path"}) for name, d in data.items()},
            "exit_code": exit_code, "seconds": round(seconds, 1),
            "paper_values": {m.name: m.value for m in task.expected_results}}
    names = ", ".join(sorted(data))
    return task.model_copy(update={
        "id": variant_id(task, data), "expected_results": expected,
        # values the user's command printed as its answer are read where it printed them (R3)
        **({"run": task.run.model_copy(update={"answer": "stdout_json"})}
           if not task.expected_results and not task.run.results_file else {}),
        "data": {**task.data, **{name: None for name in data}},
        "extra": {**task.extra, KEY: made},
        "warnings": [*task.warnings, f"expected values are the reference's own run on the given data ({names}), "
                     "not the paper's"]})


def _user_command(task: TaskSpec) -> bool:
    """Whether the task's command is one the user gave (`reference.py`): its printed numbers may then define
    what is expected of a task that names no expected value (EXP-Bench's prose outcomes)."""
    return bool((task.extra.get("reference") or {}).get("command"))


def printed_numbers(stdout: str) -> dict[str, float]:
    """Every finite number of the last JSON object `stdout` prints, by its flattened name."""
    from failatlas.bench_core.scoring.answers import printed_answer

    answer = printed_answer(stdout, set()) or {}
    out = {}
    for name, value in answer.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(float(value)):
            out[str(name)] = float(value)
    return out


def reference_values(task: TaskSpec, stdout: str) -> tuple[dict[str, float], list[str]]:
    """Every expected metric's value as the reference's printed answer names it, and what it does not name as a
    finite number (text, null, a list, true/false, NaN or infinity is no expected value: the reference's output
    is the repository's, and a variant must never be valued on it, nor may it stop the validation)."""
    from failatlas.bench_core.scoring.evidence.reference_answer import _printed

    values = {}
    for name, value in _printed(task, stdout).items():
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        try:
            number = float(value)
        except (ValueError, OverflowError):
            continue
        if math.isfinite(number):
            values[name] = number
    return values, [m.name for m in task.expected_results if m.name not in values]


def make_variants(tasks: list[TaskSpec], data_of: Callable[[TaskSpec], dict[str, Path]],
                  reference_of: Callable[[TaskSpec], Path | None], start_for, *,
                  existing: Callable[[str], TaskSpec | None],
                  say: Callable[[str], None] = lambda _line: None) -> tuple[list[TaskSpec], dict[str, str]]:
    """Each task replaced by its variant valued on its data where the reference's run gives every expected value
    (a stored variant of the same data is reused); task id -> a one-line note for every task.
    `start_for(task)(tree)` is a context manager giving a sandbox of the validation's kind over a copy of the
    reference tree."""
    import shutil
    import tempfile

    from failatlas.bench_core.prepare.workspace import writable

    out: list[TaskSpec] = []
    notes: dict[str, str] = {}
    ran: dict[tuple, tuple] = {}  # one reference run per reference tree, command and data: a paper's tasks share it
    for task in tasks:
        if not task.run.command or not (task.expected_results or _user_command(task)):
            notes[task.id] = "no expected values or no reference command to value them from: validated as it is"
            out.append(task)
            continue
        data = fingerprints(data_of(task))
        vid = variant_id(task, data)
        stored = existing(vid)
        if stored is not None:
            notes[task.id] = f"{vid}: stored variant reused"
            out.append(stored)
            continue
        reference = reference_of(task)
        if reference is None:
            notes[task.id] = "no reference tree: validated as it is"
            out.append(task)
            continue
        same = (str(reference), task.run.command, task.run.timeout_s, task.resources.environment,
                json.dumps({n: d.model_dump(exclude={"path"}) for n, d in sorted(data.items())}, sort_keys=True))
        if same in ran:
            result, seconds = ran[same]
            say(f"{task.id}: the reference's run on this data is the one made for an earlier task of its paper")
        else:
            with tempfile.TemporaryDirectory(prefix="failatlas-standin-") as tmp:
                tree = Path(tmp) / "reference"
                shutil.copytree(reference, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
                writable(tree)
                say(f"{task.id}: running the reference's own command to value it on the given data")
                started = time.monotonic()
                try:
                    with start_for(task)(tree) as sandbox:
                        workdir = getattr(sandbox, "workdir", None) or "/workspace"
                        result = sandbox.exec(task.run.command, timeout=task.run.timeout_s, cwd=workdir)
                except InfrastructureError as exc:  # its environment is not built, the sandbox cannot start
                    notes[task.id] = (f"the reference's own run could not start ({exc.one_line()[:200]}): "
                                      "validated as it is")
                    out.append(task)
                    continue
                seconds = time.monotonic() - started
            ran[same] = (result, seconds)
        if not result.success:
            tail = (result.stderr or result.stdout or "").strip().splitlines()[-1:] or ["?"]
            notes[task.id] = (f"the reference's own run failed (exit {result.returncode}: {tail[0][:200]}): "
                              "validated as it is")
            out.append(task)
            continue
        if task.expected_results:
            values, missing = reference_values(task, result.stdout or "")
        else:  # the user's command defines the values: every number it prints as its answer (R3)
            values, missing = printed_numbers(result.stdout or ""), []
            if not values:
                notes[task.id] = "the reference's run printed no JSON object of numbers: validated as it is"
                out.append(task)
                continue
        if missing:
            notes[task.id] = (f"the reference's run names no value for {len(missing)} expected metric(s) (e.g. "
                              f"{', '.join(missing[:3])}): validated as it is")
            out.append(task)
            continue
        made = variant(task, values, data, exit_code=result.returncode, seconds=seconds)
        notes[task.id] = f"{made.id}: {len(values)} expected value(s) from the reference's run ({seconds:.0f} s)"
        out.append(made)
    return out, notes


def for_validation(store, tasks: list[TaskSpec], params, *, environment,
                   say: Callable[[str], None] = lambda _line: None) -> tuple[list[TaskSpec], dict[str, str]]:
    """`make_variants` for `tasks validate`: the reference from `--repo`, else the repository cache, else the
    bundled folder; a sandbox like the derived tests' recording (`recordings._starter`); the variants made are
    saved in the catalog (validation's runs find them there)."""
    from failatlas.bench_core.repos import repository_for
    from failatlas.bench_core.runs.data import task_data
    from failatlas.bench_core.runs.inputs import repository_of
    from failatlas.bench_core.scoring.evidence.recording import reference_tree
    from failatlas.bench_core.task_validation.recordings import _starter
    from failatlas.bench_core.tasks.catalog import get_task, save_tasks
    from failatlas.core.errors import NotFoundError

    def reference_of(task: TaskSpec) -> Path | None:
        cached = None if params.repo is not None else repository_for(store, task)
        used = repository_of(task, repo=params.repo, cached=cached)
        return reference_tree(task, used.path) if used is not None else None

    def existing(task_id: str) -> TaskSpec | None:
        try:
            return get_task(store, task_id)
        except NotFoundError:
            return None

    made, notes = make_variants(tasks, lambda task: task_data(task, params.data)[0], reference_of,
                                lambda task: _starter(task, params, environment=environment(task)), existing=existing,
                                say=say)
    out, new = [], []
    for task, got in zip(tasks, made, strict=True):
        if is_variant(got) and got.id != task.id and existing(got.id) is None:
            # stored as its task is stored, without this validation's overrides (--gpus, --environment, ...)
            got = get_task(store, task.id).model_copy(update={
                name: getattr(got, name) for name in ("id", "expected_results", "data", "extra", "warnings")})
            new.append(got)
        out.append(params.resources.apply(got) if is_variant(got) else got)
    if new:
        save_tasks(store, new, source="tasks validate --expected-from-reference")
    return out, notes

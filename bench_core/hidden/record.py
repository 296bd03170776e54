"""Hidden tests derived from the reference: record the masked functions' calls while the task's own reference
command runs (`record_calls`), keep only the calls the reference itself reproduces across the boundary
(`self_check`), and write them as a hidden-test file (`write_replay_test`) that `run_judge` runs like any other.

Recording runs trusted code only: a sandbox started from the task's reference tree, never an agent's. The recorder
(`recorder.py`, installed as `sitecustomize.py` on PYTHONPATH) writes plain data (`wire`) only; nothing is pickled.
A `Recording` is wire data too, so it can be stored beside the task and read back without running anything.
"""

from __future__ import annotations

import base64
import io
import json
import re
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from failatlas.bench_core.hidden import wire
from failatlas.bench_core.hidden.relay import HERE, JudgeError, run_judge
from failatlas.bench_core.sandbox.protocol import write_folder
from failatlas.core.errors import FailAtlasError, InfrastructureError

# bump when what is recorded or how it is replayed changes: stored recordings of another version are not reused
RECORDER_VERSION = 7  # 3: numpy scalars keep their dtype, torch tensors are recorded; 4: reproduced in a fresh
# sandbox; 5: arguments a call changes in place are recorded and compared; 6: numbers among the arguments perturbed;
# 7: the functions any of whose calls the reference did not reproduce are named (`unreproducible_targets`)
RECORD_DIR = ".failatlas-record"
CASE_FIELDS = ("t", "module", "root", "qualname", "kind", "args", "kwargs", "state", "self", "ret", "perturbed")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.<>-]+")
MAX_LINES = 20_000  # lines of a recording read: cases and skips of every call recorded, with room to spare


@dataclass(frozen=True)
class Limits:
    """Caps on one recording: calls recorded per function, bytes per call and in all, how many recorded calls of
    a function get perturbed copies and how many each, and the seconds per function those extra calls may take."""

    max_calls: int = 8
    max_call_bytes: int = 1 << 20
    max_total_bytes: int = 12 << 20
    perturb_calls: int = 2
    perturbations: int = 2
    extra_budget_s: float = 30.0
    seed: int = 0


@dataclass
class Recording:
    """The replayable calls of one reference run (`cases`, plain data) and what became of the others."""

    targets: list[dict]
    cases: list[dict] = field(default_factory=list)
    calls_seen: int = 0
    seen: dict[str, int] = field(default_factory=dict)  # target index (a string) -> its calls, all processes
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> calls (unencodable, too_large, ...)
    unreproducible: int = 0  # recorded, but the reference in a fresh process did not give the same result
    unreproducible_targets: list[int] = field(default_factory=list)  # the functions (target indices) of those
    stub_passes: int = 0  # recorded, but the masked stubs give the same result: they test nothing
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)
    version: int = RECORDER_VERSION

    @property
    def perturbed(self) -> int:
        return sum(1 for c in self.cases if c["perturbed"])

    @property
    def unencodable(self) -> int:
        return self.skipped.get("unencodable", 0) + self.skipped.get("too_large", 0)

    def to_bytes(self) -> bytes:
        return wire.encode(asdict(self))

    @classmethod
    def from_bytes(cls, data: bytes) -> Recording:
        """Raises WireError or ValueError when `data` is not a recording of this version."""
        value = wire.decode(data)
        if not isinstance(value, dict) or value.get("version") != RECORDER_VERSION:
            raise ValueError("not a recording of this recorder version")
        return cls(**{k: value[k] for k in cls.__dataclass_fields__ if k in value})


def _spec(workdir: str, targets: list[dict], limits: Limits, observe: bool = False) -> dict:
    return {"root": workdir, "out": f"{workdir}/{RECORD_DIR}/calls.jsonl", "targets": targets, "observe": observe,
            **asdict(limits)}


def install_recorder(sandbox, targets: list[dict], limits: Limits, *, observe: bool = False,
                     extra: dict | None = None) -> tuple[dict, dict[str, str]]:
    """Write the recorder for `targets` into `sandbox`'s working copy; its spec and the environment a command
    needs to run under it. `observe`: an agent's run is observed (`observe.py`): an instance's attributes that are
    not plain data are left out of its state one by one, rather than the whole call."""
    workdir = getattr(sandbox, "workdir", None) or "/workspace"
    spec = {**_spec(workdir, targets, limits, observe), **(extra or {})}
    write_folder(sandbox, RECORD_DIR, [("sitecustomize.py", (HERE / "recorder.py").read_bytes()),
                                       ("failatlas_wire.py", (HERE / "wire.py").read_bytes()),
                                       ("spec.json", json.dumps(spec).encode())])
    env = {"PYTHONPATH": f"{workdir}/{RECORD_DIR}", "FAILATLAS_RECORD_SPEC": f"{workdir}/{RECORD_DIR}/spec.json",
           "PYTHONDONTWRITEBYTECODE": "1"}
    return spec, env


def record_calls(sandbox, *, command: str, targets: list[dict], timeout_s: float,
                 limits: Limits = Limits()) -> Recording:
    """Run `command` in `sandbox` (started from the reference tree; trusted code only) with the recorder
    installed for `targets` (dicts of `path`, `qualname`), and read back what it recorded. Raises
    InfrastructureError (SandboxError) when the sandbox fails."""
    workdir = getattr(sandbox, "workdir", None) or "/workspace"
    spec, env = install_recorder(sandbox, targets, limits)
    result = sandbox.exec(command, timeout=timeout_s, cwd=workdir, env=env)
    recording = Recording(targets=targets, exit_code=result.returncode)
    if result.timed_out or result.killed_reason:
        recording.notes.append(f"the reference command was stopped ({result.killed_reason or 'timeout'}); the "
                               "calls it made before are kept")
    elif result.returncode != 0:
        tail = [ln for ln in (result.stderr or "").splitlines() if ln.strip()][-1:]
        recording.notes.append(f"the reference command exited with {result.returncode}"
                               + (f": {tail[0][:200]}" if tail else ""))
    try:
        data = sandbox.read_file(spec["out"], max_bytes=limits.max_total_bytes + (512 << 10))
    except InfrastructureError:
        raise
    except (FailAtlasError, OSError, ValueError) as exc:  # no file: nothing was recorded
        recording.notes.append(f"no call was recorded ({type(exc).__name__})")
        return recording
    read_lines(recording, data, limits)
    return recording


def well_formed(line: dict, targets: int) -> bool:
    """Whether a case line has every field, of the type the recorder writes (an observed run's lines are the
    agent's data: an array where an index belongs must not reach a comparison or a dict key)."""
    return (all(k in line for k in CASE_FIELDS) and type(line["t"]) is int and 0 <= line["t"] < targets
            and type(line["perturbed"]) is bool and type(line["self"]) is bool
            and line["kind"] in ("function", "method") and all(isinstance(line[k], str) for k in ("module", "root",
                                                                                                   "qualname"))
            and isinstance(line["args"], list) and isinstance(line["kwargs"], dict)
            and (line["state"] is None or isinstance(line["state"], dict)))


def read_lines(recording: Recording, data: bytes, limits: Limits) -> None:
    """Fill `recording` from the recorder's JSON lines, within `limits` (several processes may have written):
    blank lines are passed over and at most MAX_LINES others read, so a file of millions of tiny lines costs no
    more than a full one."""
    per_target: dict[tuple[int, bool], int] = {}
    names = [t["qualname"] for t in recording.targets]
    read = 0
    for raw in io.BytesIO(data):  # one line at a time: millions of empty lines are not held as objects at once
        if not raw.strip():
            continue
        read += 1
        if read > MAX_LINES:
            recording.skipped["unread"] = recording.skipped.get("unread", 0) + 1
            recording.notes.append(f"lines past the first {MAX_LINES} were not read")
            break
        try:
            line = wire.decode(raw)
        except wire.WireError:
            recording.skipped["unreadable"] = recording.skipped.get("unreadable", 0) + 1
            continue
        if not isinstance(line, dict):
            continue
        if "seen" in line and isinstance(line["seen"], dict):
            for key, count in line["seen"].items():
                if type(count) is int and count > 0 and key.isdigit() and int(key) < len(names):
                    recording.calls_seen += count
                    recording.seen[key] = recording.seen.get(key, 0) + count
            continue
        if "skip" in line:
            reason = str(line["skip"])[:40]
            recording.skipped[reason] = recording.skipped.get(reason, 0) + 1
            target = line.get("t")
            if line.get("why"):
                name = names[target] if isinstance(target, int) and 0 <= target < len(names) else "?"
                note = f"{name}: {reason}: {str(line['why'])[:200]}"
                if len(recording.notes) < 20 and note not in recording.notes:
                    recording.notes.append(note)
            continue
        if not well_formed(line, len(names)):
            recording.skipped["unreadable"] = recording.skipped.get("unreadable", 0) + 1
            continue
        key = (line["t"], bool(line["perturbed"]))
        cap = limits.max_calls if not key[1] else limits.perturb_calls * limits.perturbations
        if per_target.get(key, 0) >= cap:
            continue
        per_target[key] = number = per_target.get(key, 0) + 1
        kind = "perturbed" if key[1] else "recorded"
        unique = names.count(line["qualname"]) > 1
        label = f"{line['t']}.{line['qualname']}" if unique else str(line["qualname"])
        case = {k: line[k] for k in CASE_FIELDS}
        duration = line.get("duration")
        mutated = line.get("mutated")
        if not (isinstance(mutated, dict) and all(isinstance(mutated.get(k), dict) for k in ("args", "kwargs"))):
            mutated = None
        case.update(after=line.get("after") if line["kind"] == "method" else None, number=number, mutated=mutated,
                    id=_ID_UNSAFE.sub("_", f"{label}-{kind}-{number}"),
                    duration=float(duration) if isinstance(duration, int | float) and duration >= 0 else 0.0)
        recording.cases.append(case)


def replay_source(cases: list[dict]) -> str:
    """The text of a hidden-test file that replays `cases` (`replay.py` with the cases in its first line)."""
    data = base64.b64encode(zlib.compress(wire.encode(cases), 6)).decode("ascii")
    return f'CASES_DATA = "{data}"\n' + (HERE / "replay.py").read_text()


def write_replay_test(cases: list[dict], folder: Path, name: str = "test_derived.py") -> Path:
    """Write the hidden-test file replaying `cases` into `folder`; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(replay_source(cases))
    return path


def test_id(name: str) -> str | None:
    """The case id of a judge's test name `test_derived[<id>]`."""
    return name[len("test_derived["):-1] if name.startswith("test_derived[") and name.endswith("]") else None


def replay_timeout(cases: list[dict], floor_s: float) -> float:
    """Seconds for replaying `cases`: three times what the reference's calls took plus 5 s a call (a fresh
    process each), at least `floor_s`."""
    return max(floor_s, sum(3 * c.get("duration", 0.0) + 5 for c in cases))


def replay(cases: list[dict], sandbox, *, timeout_s: float, pristine: Path | None = None):
    """Run the derived tests of `cases` against `sandbox` (`run_judge`): the JudgeRun."""
    with tempfile.TemporaryDirectory(prefix="failatlas-derived-") as tmp:
        path = write_replay_test(cases, Path(tmp))
        return run_judge([path], sandbox, pristine=pristine, timeout_s=timeout_s)


def _finished(run, whose: str):
    """`run`, when it ran to the end; JudgeError (nothing is stored) when it did not: a replay of trusted code that
    stops (a deadline on a loaded machine) says nothing about the cases."""
    if run.problems:
        raise JudgeError(f"the replay on {whose} did not finish: {run.problems[0][:200]}")
    return run


def self_check(recording: Recording, sandbox, *, timeout_s: float) -> Recording:
    """Keep only the cases the reference (in `sandbox`, started from the reference tree) passes when replayed
    exactly as an agent's code will be: a fresh process per call, the instance rebuilt from its `__dict__`. What a
    function does with state the replay cannot carry (globals set by the run, a random stream) drops out here."""
    if not recording.cases:
        return recording
    run = _finished(replay(recording.cases, sandbox, timeout_s=replay_timeout(recording.cases, timeout_s)),
                    "the reference")
    passed = {test_id(name) for name in run.passed}
    kept = [c for c in recording.cases if c["id"] in passed]
    recording.unreproducible += len(recording.cases) - len(kept)
    recording.unreproducible_targets = sorted({c["t"] for c in recording.cases if c["id"] not in passed}
                                              | set(recording.unreproducible_targets))
    failed = [f for f in run.failures if test_id(f["test"]) is not None][:3]
    recording.notes.extend(f"not reproduced by the reference: {test_id(f['test'])}: {f['message'][:160]}"
                           for f in failed)
    recording.cases = kept
    return recording


def drop_stub_passes(recording: Recording, sandbox, *, timeout_s: float) -> Recording:
    """Drop the cases that pass in `sandbox` (started from the masked repository, every masked function a stub):
    a case the stubs pass cannot tell an implementation from none."""
    if not recording.cases:
        return recording
    run = _finished(replay(recording.cases, sandbox, timeout_s=replay_timeout(recording.cases, timeout_s)),
                    "the masked stubs")
    passing = {test_id(name) for name in run.passed}
    kept = [c for c in recording.cases if c["id"] not in passing]
    recording.stub_passes += len(recording.cases) - len(kept)
    recording.cases = kept
    return recording

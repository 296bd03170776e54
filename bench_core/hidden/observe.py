"""The masked functions observed in E's own re-run, and whether they computed there what the reference computed.

A derived test replays a recorded call in a fresh worker process, which a function can tell from the experiment
(the interpreter's flags, its callers, its working directory) and answer correctly only there. The calls made by
the experiment itself cannot be told from the experiment. So the clean re-run of the task's command on the
constructed tree (E's evidence) runs with the recorder installed (`install`): the same calls are recorded as in the
reference's run (numbers 1-3 and the powers of two, up to `max_calls` a function), and nothing is called twice or
perturbed, so the run does exactly what it would do unobserved. `agreement` then looks, for each call the
reference recorded and reproduced, for the run's call of the same function on the same inputs (within the
comparison's tolerance) and checks its results with the derived tests' own rule (`compare.check`).

What comes back is the agent's data: its code ran in that process and may have rewritten or emptied the file. It
is decoded strictly (`wire`), within the recording's caps (`record.read_lines`), and never believed by itself: a
call counts only where its inputs are the reference's and its results are the reference's, which no line can
claim without computing them. A run whose recording is missing, emptied or flooded therefore meets none of the
reference's calls, and that fails, as a run whose functions were never called does.

The rule (docs/metrics.md, "Derived tests"): every recorded call of the reference the run met must agree; when the
run's command exited 0, every one must have been met (a deterministic experiment makes the same calls); when it did
not, a function must have been met at least once, and the calls after the stop are reported as not reached.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from failatlas.bench_core.hidden import wire
from failatlas.bench_core.hidden.compare import check, first_difference, keys_difference
from failatlas.bench_core.hidden.record import (
    RECORD_DIR,
    Limits,
    Recording,
    install_recorder,
    read_lines,
    well_formed,
)
from failatlas.bench_core.sandbox.model import CopyLimits
from failatlas.core.errors import FailAtlasError, InfrastructureError

CALLS_FILE = f"{RECORD_DIR}/calls.jsonl"


SAMPLE_SLOTS = 128  # per function and process: how many of every call are kept whole (recorder.py's reservoir)
SAMPLE_DIR = f"{RECORD_DIR}/sample"
SAMPLE_LIMITS = CopyLimits(max_file_bytes=2 << 20, max_total_bytes=96 << 20, max_entries=8192, max_depth=2,
                           deadline_s=120.0)


@dataclass(frozen=True)
class Watch:
    """What an observed run records: the masked functions (the reference recording's `targets`, so a call's
    target index means the same function) within the recording's `limits`; `sample`: slots of the reservoir of
    every call, per function and process (0: none); `state_keys`: per target index, the attributes of an instance
    the reference's own calls had (only those are recorded of the run's)."""

    targets: list[dict]
    limits: Limits
    sample: int = 0
    state_keys: dict = field(default_factory=dict)


@dataclass
class Observed:
    """The calls of the masked functions that E's re-run recorded (`cases`, decoded), what was skipped, and
    whether its command exited 0 (`completed`)."""

    cases: list[dict] = field(default_factory=list)
    completed: bool = False
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # the reservoir of every call (module docstring of recorder.py): kept calls, and per function how many calls the
    # run made (the sum over its processes of the last call number each kept)
    sample: list[dict] = field(default_factory=list)
    population: dict[int, int] = field(default_factory=dict)
    sample_missing: dict[int, int] = field(default_factory=dict)  # per function: kept calls the reservoir lacks
    sample_skipped: dict[int, int] = field(default_factory=dict)  # per function: kept calls too large or unencodable
    sample_foreign: int = 0  # files in the sample folder the recorder did not write


def observing(limits: Limits) -> Limits:
    """`limits` for an observed run: the same calls recorded, none made again or perturbed."""
    return dataclasses.replace(limits, perturb_calls=0, perturbations=0)


def install(sandbox, watch: Watch) -> dict[str, str]:
    """Install the recorder for `watch` in `sandbox`; the environment the observed command runs with."""
    extra = {"sample": watch.sample, "state_keys": watch.state_keys} if watch.sample else None
    return install_recorder(sandbox, watch.targets, observing(watch.limits), observe=True, extra=extra)[1]


def collect(sandbox, watch: Watch, *, completed: bool) -> Observed:
    """What the observed run recorded, read from `sandbox` as the agent's data. Raises InfrastructureError when
    the sandbox fails; a file that is gone or unreadable is an empty observation, with the reason."""
    limits = observing(watch.limits)
    workdir = getattr(sandbox, "workdir", None) or "/workspace"
    out = Observed(completed=completed)
    try:
        data = sandbox.read_file(f"{workdir}/{CALLS_FILE}", max_bytes=limits.max_total_bytes + (512 << 10))
    except InfrastructureError:
        raise
    except (FailAtlasError, OSError, ValueError) as exc:
        out.notes.append(f"no call was recorded in the run ({type(exc).__name__})")
        return out
    recording = Recording(targets=watch.targets)
    try:
        read_lines(recording, data, limits)
    except (ValueError, TypeError, LookupError, RecursionError, MemoryError) as exc:  # the agent's bytes
        out.notes.append(f"the run's record cannot be read ({type(exc).__name__})")
        return out
    out.cases = [c for c in recording.cases if not c["perturbed"]]  # an observed run perturbs nothing
    out.skipped, out.notes = dict(recording.skipped), recording.notes[:10]
    out.population = {int(k): n for k, n in recording.seen.items()}
    return out



def collect_sample(sandbox, watch: Watch, out: Observed) -> None:
    """The reservoir's kept calls (recorder.py) into `out`, copied out within SAMPLE_LIMITS and decoded strictly as
    the agent's data. Only the recorder writes that folder, and what it writes is known exactly: per process and
    function, slot files `<pid>-<function>-<slot>.json` (slot < the reservoir's size) holding that process's and
    function's calls, distinct call numbers, min(slots, its last call number) of them (a call whose result could not
    be kept leaves a skip in its slot), and `.tmp` files a killed write left. Anything else is `sample_foreign`
    (written by someone else: the agent's code, which ran in that process), and a finished run with fewer files
    than that removed some: `sample_missing`. Both fail I (evidence/calls.py)."""
    workdir = getattr(sandbox, "workdir", None) or "/workspace"
    numbers: dict[tuple[int, int], set[int]] = {}
    foreign = 0
    with tempfile.TemporaryDirectory(prefix="failatlas-sample-") as tmp:
        try:
            report = sandbox.copy_out(f"{workdir}/{SAMPLE_DIR}", Path(tmp) / "sample", limits=SAMPLE_LIMITS)
        except InfrastructureError:
            raise
        except (FailAtlasError, OSError, ValueError):
            report = None
        # no report: no folder, so an empty sample. A copy stopped by the total or entry caps is still a sample, but
        # its count says nothing; an entry left out for itself (a link, a file over the per-call size) is foreign
        whole = report is None or not (report.stopped or report.over_total)
        if not whole:
            out.notes.append(f"the run's sample was copied only in part ({report.stopped or 'total size cap'}): "
                             "whether it was whole is not checked")
        elif report is not None:
            foreign += len(report.cut) + report.more_cut
        folder = Path(tmp) / "sample"
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if _TMP_NAME.fullmatch(path.name) and path.parent == folder and path.is_file() \
                    and not path.is_symlink():
                continue
            line = _slot_file(path, folder, watch)
            if line is None:
                foreign += 1
                continue
            seen = numbers.setdefault((line["t"], line["pid"]), set())
            if line["n"] in seen:
                foreign += 1
                continue
            seen.add(line["n"])
            if "skip" in line:
                out.sample_skipped[line["t"]] = out.sample_skipped.get(line["t"], 0) + 1
            else:
                out.sample.append(line)
    from_sample: dict[int, int] = {}
    for (target, _pid), held in numbers.items():
        n = max(held)
        from_sample[target] = from_sample.get(target, 0) + n
        expected = min(watch.sample, n)
        if len(held) > expected:
            foreign += len(held) - expected
        elif whole and out.completed and len(held) < expected:
            out.sample_missing[target] = out.sample_missing.get(target, 0) + expected - len(held)
    for target, n in from_sample.items():  # a process that did not exit normally wrote no count of its calls
        out.population[target] = max(out.population.get(target, 0), n)
    if whole and out.completed:  # a function the run's record saw called, with no reservoir at all
        for target in {c["t"] for c in out.cases} - {t for t, _ in numbers}:
            out.sample_missing[target] = out.sample_missing.get(target, 0) + 1
    if foreign:
        out.sample_foreign = foreign
        out.notes.append(f"{foreign} file(s) in the run's sample were not written by the recorder")


_SLOT_NAME = re.compile(r"([0-9]{1,10})-([0-9]{1,6})-([0-9]{1,6})\.json")
_TMP_NAME = re.compile(r"[0-9]{1,10}-[0-9]{1,6}-[0-9]{1,6}\.json\.[0-9]{1,24}\.tmp")


def _slot_file(path: Path, folder: Path, watch: Watch) -> dict | None:
    """The call (or skip) a slot file holds, when it is exactly what the recorder writes there; else None."""
    match = _SLOT_NAME.fullmatch(path.name)
    if match is None or path.parent != folder or path.is_symlink() or not path.is_file():
        return None
    pid, target, slot = (int(g) for g in match.groups())
    if slot >= watch.sample:
        return None
    try:
        line = wire.decode(path.read_bytes())
    except (wire.WireError, OSError, ValueError, RecursionError):
        return None
    if not _sampled(line, watch.targets) or line["pid"] != pid or line["t"] != target:
        return None
    return line


def _sampled(line, targets: list[dict]) -> bool:
    """Whether a kept file is one the recorder writes: a well-formed call (or a skip) of the function whose target
    index it gives (a file naming another module or function would make the replay import what the reference tree
    holds under that name)."""
    if not (isinstance(line, dict) and type(line.get("n")) is int and type(line.get("pid")) is int
            and line["n"] > 0 and type(line.get("t")) is int and 0 <= line["t"] < len(targets)):
        return False
    if "skip" in line:
        return isinstance(line["skip"], str)
    if not well_formed(line, len(targets)):
        return False
    target = targets[line["t"]]
    stem = PurePosixPath(str(target.get("path") or "")).stem
    return line["qualname"] == target.get("qualname") and str(line["module"]).split(".")[-1] in (stem, "__main__")


def _inputs_difference(case: dict, seen: dict) -> str | None:
    """Where the observed call's inputs differ from the reference's (an instance's attributes: those the
    reference's had, so an implementation may keep more of its own)."""
    for part in ("args", "kwargs"):
        found = first_difference(case[part], seen.get(part), part)
        if found:
            return found
    if case["kind"] == "method":
        state, have = case.get("state") or {}, seen.get("state")
        if not isinstance(have, dict):
            return "state: not recorded"
        return keys_difference(state, have, "state.")
    return None


def _reply(seen: dict) -> dict:
    mutated = seen.get("mutated") or {"args": {}, "kwargs": {}}
    return {"self": seen.get("self") is True, "ret": seen.get("ret"), "after": seen.get("after"), "mutated": mutated}


@dataclass
class Agreement:
    """How the run's calls compare with the reference's recorded ones, per function: `cases` (the reference's),
    `agreed`, `differed` (met on the same inputs, other results; `first_difference` in words) and `unmet`."""

    functions: dict[str, dict] = field(default_factory=dict)
    completed: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def checked(self) -> int:
        return sum(row["cases"] for row in self.functions.values())

    @property
    def agreed(self) -> int:
        return sum(row["agreed"] for row in self.functions.values())

    def failures(self) -> list[str]:
        """One sentence per function that fails the rule (module docstring); none when the run agrees."""
        out = []
        for name, row in self.functions.items():
            if row["differed"]:
                out.append(f"In E's re-run, {name} gave other results than the reference on the reference's inputs "
                           f"({row['differed']} of {row['cases']} calls): {row['first_difference']}")
            elif row["unmet"] and (self.completed or not row["agreed"]):
                how = ("the run finished" if self.completed else "the run stopped before any was")
                out.append(f"In E's re-run, {row['unmet']} of {row['cases']} calls of {name} the reference made "
                           f"are not in the run's record (made on other inputs, never made, or their record "
                           f"removed), and {how}: the function was not observed computing the reference's results")
        return out

    @property
    def passed(self) -> bool:
        return self.checked > 0 and not self.failures()

    def summary(self) -> dict:
        return {"completed": self.completed, "cases": self.checked, "agreed": self.agreed,
                "functions": self.functions, **({"notes": self.notes} if self.notes else {})}


def agreement(reference: list[dict], observed: Observed) -> Agreement:
    """Compare each recorded (not perturbed) call of the reference with the observed run's calls of the same
    function on the same inputs."""
    out = Agreement(completed=observed.completed, notes=list(observed.notes))
    by_target: dict = {}
    for seen in observed.cases:
        by_target.setdefault(seen["t"], []).append(seen)
    for case in reference:
        if case["perturbed"]:
            continue
        row = out.functions.setdefault(case["qualname"], {"cases": 0, "agreed": 0, "differed": 0, "unmet": 0,
                                                          "first_difference": None})
        row["cases"] += 1
        met = [seen for seen in by_target.get(case["t"], []) if _safe(_inputs_difference, case, seen) is None]
        if not met:
            row["unmet"] += 1
            continue
        # every line on the reference's inputs must agree: a second line claiming the reference's results beside
        # the recorder's own does not outvote it
        differences = [d for d in (_safe(check, case, _reply(seen)) for seen in met) if d is not None]
        if not differences:
            row["agreed"] += 1
        else:
            row["differed"] += 1
            row["first_difference"] = row["first_difference"] or f"call {case['number']}: {differences[0]}"[:300]
    return out


def _safe(compare, case: dict, seen: dict) -> str | None:
    """`compare`, with values of the agent's that the comparison cannot handle a difference, never an exception."""
    try:
        return compare(case, seen)
    except (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError, LookupError) as exc:
        return f"cannot be compared: {type(exc).__name__}"

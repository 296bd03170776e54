"""Reading a benchmark's own command where it prints no JSON answer (AutoExperiment's refsol): a reader derived from
the reference's own run of that command (docs/metrics.md, "How E is decided").

AutoExperiment's reference commands (`echo Experiment 1` / `python train.py ...`) print logs, not the answer, so the
answer has no fixed name or format. The harness runs the same command once on the reference tree (the task's
repository, unmasked), finds where each expected value appears in what it printed or in a text file it wrote
(within the metric's tolerance), and keeps *where* as a locator: the output's `Experiment N` section, the shape of
the line (its text with every number replaced by `#`), which line of that shape in the section, and which number on
it; a metric the run's printed JSON answer names is read by its name instead. The constructed tree's re-run of the
same command is then read at the same places. A value the reference run
does not show cannot be read: the reader is not derived and E falls back to the agent's script (`script`), which
the report says. Derivation is cached by the reference tree's content and the command, beside the store
(`<store folder>/derived-tests/answer-<key>.json`, written atomically), so scoring runs the reference once per task.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from failatlas.bench_core.tasks.model import TaskSpec

READER_VERSION = 2
MAX_TEXT = 1024 * 1024
MAX_FILES = 50
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
_SECTION = re.compile(r"^\s*(Experiment \d+)\s*:?\s*$")
_TEXT_SUFFIXES = (".txt", ".log", ".csv", ".tsv", ".json", ".out", ".md", ".yaml", ".yml")
_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


@dataclass
class Locator:
    """Where one expected metric is read: `source` (`stdout` or a file path of the tree), the `Experiment N`
    section (None: the whole text), the line's `shape`, the `occurrence`-th line of that shape in the section, and
    the `token`-th number on it."""

    metric: str
    source: str
    section: str | None
    shape: str
    occurrence: int
    token: int


@dataclass
class Reader:
    """The locators of every expected metric (`ok`), or why none could be derived (`notes`)."""

    locators: list[Locator] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ok: bool = False

    def values(self, stdout: str, files: dict[str, str]) -> dict[str, float]:
        """`read(self, stdout, files)`: what the E rule of a reader compares."""
        return read(self, stdout, files)


JSON_SHAPE = "<the JSON answer it prints>"


def _printed(task: TaskSpec, stdout: str) -> dict:
    """The expected metrics the answer printed in `stdout` names (`answers.printed_answer`), name -> value."""
    from failatlas.bench_core.scoring.answers import observed, printed_answer

    experiments = {m.experiment for m in task.expected_results if m.experiment}
    answer = printed_answer(stdout, experiments)
    return observed(answer, [m.name for m in task.expected_results]) if answer else {}


def _printed_names(reader: Reader, stdout: str) -> dict:
    from failatlas.bench_core.scoring.answers import observed, printed_answer

    names = [loc.metric for loc in reader.locators if loc.shape == JSON_SHAPE]
    experiments = {name.split(".")[0] for name in names if name.startswith("Experiment ")}
    answer = printed_answer(stdout, experiments)
    return observed(answer, names) if answer else {}


def _shape(line: str) -> str:
    return _NUMBER.sub("#", line.strip())


def _lines(text: str) -> list[tuple[str | None, str]]:
    """(section, line) for every line of `text`."""
    section, out = None, []
    for line in text[-MAX_TEXT:].splitlines():
        mark = _SECTION.match(line)
        if mark:
            section = mark.group(1)
            continue
        out.append((section, line))
    return out


def _close(a: float, b: float, rtol: float, atol: float) -> bool:
    return math.isfinite(a) and abs(a - b) <= atol + rtol * abs(b)


def derive(task: TaskSpec, stdout: str, files: dict[str, str]) -> Reader:
    """The reader of `task`'s expected metrics from the reference run's `stdout` and the text `files` it wrote."""
    sources = {"stdout": stdout, **files}
    reader = Reader()
    named = _printed(task, stdout)
    for metric in task.expected_results:
        if metric.name in named:  # the run prints an answer naming it: read by name, never by position
            reader.locators.append(Locator(metric.name, "stdout", None, JSON_SHAPE, 0, 0))
            continue
        best: tuple[float, Locator] | None = None
        for source, text in sources.items():
            seen: dict[tuple[str | None, str], int] = {}
            for section, line in _lines(text):
                shape = _shape(line)
                key = (section, shape)
                occurrence = seen[key] = seen.get(key, -1) + 1
                if metric.experiment and section not in (None, metric.experiment):
                    continue
                for token, match in enumerate(_NUMBER.finditer(line)):
                    value = float(match.group())
                    # within the metric's tolerance (at least 5 %: the paper's numbers drift from a re-run's)
                    if _close(value, metric.value, max(metric.rtol, 0.05), metric.atol):
                        distance = abs(value - metric.value)
                        if best is None or distance < best[0]:
                            best = (distance, Locator(metric.name, source, section if metric.experiment else
                                                      None, shape, occurrence, token))
        if best is None:
            reader.notes.append(f"{metric.name}: the reference's own run shows no value within tolerance of "
                                f"{metric.value:g}")
        else:
            reader.locators.append(best[1])
    reader.ok = bool(task.expected_results) and not reader.notes
    return reader


def read(reader: Reader, stdout: str, files: dict[str, str]) -> dict[str, float]:
    """The observed value of each metric the reader locates in a re-run's `stdout` and `files` (absent ones left
    out: the comparison then says they were not observed)."""
    sources = {"stdout": stdout, **files}
    out: dict[str, float] = {}
    named = None
    for loc in reader.locators:
        if loc.shape == JSON_SHAPE:
            named = _printed_names(reader, stdout) if named is None else named
            if loc.metric in named:
                out[loc.metric] = named[loc.metric]
            continue
        text = sources.get(loc.source)
        if text is None:
            continue
        k = -1
        for section, line in _lines(text):
            if (loc.section is not None and section != loc.section) or _shape(line) != loc.shape:
                continue
            k += 1
            if k == loc.occurrence:
                numbers = [m.group() for m in _NUMBER.finditer(line)]
                if loc.token < len(numbers):
                    out[loc.metric] = float(numbers[loc.token])
                break
    return out


def snapshot(tree: Path) -> dict[str, tuple[int, int]]:
    """Every regular file's (size, mtime) under `tree` (`.git` left out, links not followed)."""
    out = {}
    for folder, dirs, names in os.walk(tree):
        dirs[:] = [d for d in dirs if d != ".git" and not os.path.islink(os.path.join(folder, d))]
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                st = os.stat(path)
                out[os.path.relpath(path, tree)] = (st.st_size, st.st_mtime_ns)
    return out


def reader_key(task: TaskSpec, tree_digest: str) -> str:
    meta = json.dumps({"version": READER_VERSION, "command": task.run.command, "tree": tree_digest,
                       "metrics": [m.model_dump() for m in task.expected_results]}, sort_keys=True)
    return hashlib.sha256(meta.encode()).hexdigest()


def load(folder: Path | None, key: str) -> Reader | None:
    if folder is None:
        return None
    try:
        raw = json.loads((folder / f"answer-{key}.json").read_text())
        return Reader([Locator(**loc) for loc in raw["locators"]], list(raw["notes"]), bool(raw["ok"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(folder: Path | None, key: str, reader: Reader) -> None:
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".answer-{key}.", dir=folder)
    with os.fdopen(fd, "w") as handle:
        json.dump({"locators": [asdict(loc) for loc in reader.locators], "notes": reader.notes, "ok": reader.ok},
                  handle)
    os.replace(tmp, folder / f"answer-{key}.json")


def lock(key: str) -> threading.Lock:
    """One derivation per key at a time in this process (scoring threads)."""
    with _GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def needs_reader(task: TaskSpec) -> bool:
    """Whether E reads the task's own command through a reader: its answer is otherwise the agent's script
    (AutoExperiment: masked functions, a reference command that prints no JSON answer, expected results)."""
    return bool(task.run.agent_script and task.run.command and task.masking.functions and task.expected_results
                and not task.run.results_file)


def derive_from_reference(task: TaskSpec, reference: Path, start, scratch: Path, *, folder: Path | None,
                          tree_digest: str) -> Reader:
    """The task's reader, from `folder`'s cache or from one run of the task's command on a copy of `reference`
    in a sandbox from `start(tree)` (a context manager; the copy is read back through the sandbox)."""
    import shutil

    key = reader_key(task, tree_digest)
    with lock(key):
        cached = load(folder, key)
        if cached is not None:
            return cached
        tree, after = scratch / "reference", scratch / "reference-after"
        for path in (tree, after):
            shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(reference, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        before = hashes(tree)
        with start(tree) as sandbox:
            workdir = getattr(sandbox, "workdir", None) or "/workspace"
            result = sandbox.exec(task.run.command, timeout=task.run.timeout_s, cwd=workdir)
            if not result.success:  # not cached: the environment may be missing something today
                return Reader(notes=[f"the reference's own run of `{task.run.command[:80]}` failed (exit "
                                     f"{result.returncode}): {(result.stderr or '')[-200:].strip()}"])
            sandbox.copy_out(workdir, after)
        files = {rel: (after / rel).read_text(errors="replace") for rel, digest in sorted(hashes(after).items())
                 if before.get(rel) != digest and rel.endswith(_TEXT_SUFFIXES)}
        reader = derive(task, result.stdout or "", dict(list(files.items())[:MAX_FILES]))
        save(folder, key, reader)
        return reader


def hashes(tree: Path) -> dict[str, str]:
    """Every regular text-sized file's content hash under `tree` (`.git` left out, links not followed)."""
    out = {}
    for rel, (size, _mtime) in snapshot(tree).items():
        if size <= MAX_TEXT:
            out[rel] = hashlib.sha256((tree / rel).read_bytes()).hexdigest()
    return out

"""Ground truth that must never reach an agent, and a scan of a prepared tree for it.

A secret is a piece of text (normalised: lower case, whitespace collapsed) whose presence anywhere in the
agent's tree or its git objects means the agent could read the answer: the expected conclusion, the task spec
file, hidden tests, masked files and the bodies of masked functions.
"""

from __future__ import annotations

import hashlib
import locale
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from failatlas.bench_core.prepare.stubs import StubError, StubTarget, function_bodies, target_bodies
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.bench_core.tasks.paths import task_path
from failatlas.core.errors import FailAtlasError, InputError
from failatlas.core.paths import inside

MIN_SECRET_CHARS = 30


class GroundTruthLeakError(FailAtlasError, RuntimeError):
    """A prepared workspace holds ground truth (answer, hidden test, masked code): never hand it out."""

    exit_code = 7


@dataclass(frozen=True)
class Secret:
    """`hard` secrets block the workspace; soft ones (code that may legitimately be duplicated) only warn."""

    label: str
    text: str
    hard: bool = True


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


class SecretSet:
    """Collects secrets; texts shorter than MIN_SECRET_CHARS are skipped with a note (they match too much)."""

    def __init__(self) -> None:
        self.secrets: list[Secret] = []
        self.skipped: list[str] = []

    def add(self, label: str, text: str | None, *, hard: bool = True) -> None:
        if not text:
            return
        self.add_normalised(label, normalise(text), hard=hard)

    def add_file(self, label: str, path: Path, *, hard: bool = True) -> None:
        """The text of the file at `path` (read as `Path.read_text(errors="replace")` reads it), remembered by its
        content: one task file (a benchmark's JSONL of every row, megabytes) is the spec of many tasks."""
        data = path.read_bytes()
        key = "sha256:" + hashlib.sha256(data).hexdigest()
        self.add_normalised(label, _NORMALISED.get(key, data, locale.getpreferredencoding(False)), hard=hard)

    def add_normalised(self, label: str, norm: str, *, hard: bool = True) -> None:
        if len(norm) >= MIN_SECRET_CHARS:
            self.secrets.append(Secret(label, norm, hard))
        elif norm:
            self.skipped.append(label)

    def add_python(self, label: str, source: str, qualnames: Iterable[str] | None = None, *,
                   hard: bool = True) -> None:
        """Function bodies of `source` (all of them, or only `qualnames`)."""
        try:
            bodies = function_bodies(source)
        except SyntaxError:
            return
        wanted = set(bodies) if qualnames is None else set(qualnames)
        for qualname in sorted(wanted & set(bodies)):
            self.add(f"{label}::{qualname}", bodies[qualname], hard=hard)


def task_secrets(task: TaskSpec, reference: Path) -> SecretSet:
    """Everything from `task` and its reference tree that the agent's tree must not contain."""
    secrets = SecretSet()
    secrets.add("expected conclusion", task.expected_conclusion)
    if task.source and Path(task.source).is_file():
        secrets.add_file(f"task spec {Path(task.source).name}", Path(task.source))
    for hidden in task.implementation.hidden_tests:
        path = task_path(task, hidden, field="implementation.hidden_tests")
        if path.is_file():
            text = path.read_text(errors="replace")
            secrets.add(f"hidden test {hidden}", text)
            secrets.add_python(f"hidden test {hidden}", text, hard=False)
    for rel in task.masking.files:
        path = _not_a_link(reference, rel)
        if path is None:
            continue
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.is_dir() else [path]
        for file in files:
            text = file.read_text(errors="replace")
            secrets.add(f"masked file {file.relative_to(reference)}", text)
            if file.suffix == ".py":
                # A masked file's helpers may be copied elsewhere in the repository on purpose: warn only.
                secrets.add_python(f"masked file {file.relative_to(reference)}", text, hard=False)
    for rel, targets in function_targets(task).items():
        path = _not_a_link(reference, rel)
        if path is None or not path.is_file():
            continue
        source = path.read_text(errors="replace")
        try:
            bodies = target_bodies(source, targets, filename=rel)
        except (SyntaxError, StubError):
            continue
        for label, body in bodies.items():
            secrets.add(f"masked function in {rel}::{label}", body)
    if task.masking.overlay:
        _overlay_secrets(secrets, reference, task_path(task, task.masking.overlay, field="masking.overlay"))
    return secrets


def _not_a_link(reference: Path, rel: str) -> Path | None:
    """`reference / rel` when neither it nor a folder on the way is a link leading out of `reference`, and it is
    no link itself; else None. A repository keeps its links into /data/NAME (`tasks.data.is_data_link`), which on
    the host may reach a FIFO or a file of gigabytes: what they point at is never the repository's to scan."""
    try:
        path = inside(reference, rel, follow_last=False)
    except InputError:
        return None
    return None if path.is_symlink() else path


def function_targets(task: TaskSpec) -> dict[str, list[StubTarget]]:
    """The task's masked functions as stub targets, by file (in the task's order)."""
    by_path: dict[str, list[StubTarget]] = {}
    for ref in task.masking.functions:
        target = StubTarget(ref.qualname, ref.line_start, ref.line_end, ref.docstring)
        by_path.setdefault(ref.path, []).append(target)
    return by_path


def _overlay_secrets(secrets: SecretSet, reference: Path, overlay: Path) -> None:
    """Bodies of reference functions that the overlay's base version lacks or writes differently."""
    for base_file in sorted(p for p in overlay.rglob("*.py") if p.is_file()):
        rel = base_file.relative_to(overlay)
        ref_file = _not_a_link(reference, rel.as_posix())
        if ref_file is None or not ref_file.is_file():
            continue
        try:
            base_bodies = function_bodies(base_file.read_text(errors="replace"))
            ref_bodies = function_bodies(ref_file.read_text(errors="replace"))
        except SyntaxError:
            continue
        for qualname, body in sorted(ref_bodies.items()):
            if base_bodies.get(qualname) != body:
                secrets.add(f"extension code {rel}::{qualname}", body)


def find_leaks(documents: Iterable[tuple[str, bytes]], secrets: list[Secret]) -> list[tuple[str, Secret]]:
    """(where, secret) for every secret found in the named documents."""
    return find_normalised_leaks(((where, normalise(content.decode(errors="replace"))) for where, content in documents),
                                 secrets)


def find_normalised_leaks(documents: Iterable[tuple[str, str]], secrets: list[Secret]) -> list[tuple[str, Secret]]:
    """`find_leaks` over documents already normalised (`normalise`, `normalised_object`)."""
    found = []
    for where, text in documents:
        found.extend((where, secret) for secret in secrets if secret.text in text)
    return found


MAX_NORMALISED_CHARS = 64_000_000


class _Texts:
    """Normalised texts by git object id or content digest, up to MAX_NORMALISED_CHARS in all (then forgotten
    at once)."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.chars = 0

    def get(self, key: str, content: bytes, encoding: str = "utf-8") -> str:
        text = self.texts.get(key)
        if text is None:
            text = normalise(content.decode(encoding, errors="replace"))
            if self.chars + len(text) > MAX_NORMALISED_CHARS:
                self.texts.clear()
                self.chars = 0
            self.texts[key] = text
            self.chars += len(text)
        return text


_NORMALISED = _Texts()


def normalised_object(oid: str, content: bytes) -> str:
    """`content` (the git object `oid`) decoded and normalised, remembered by id: the objects of one repository's
    files recur in every task prepared from it, and normalising them was a third of a prepare's time. An object
    id is the hash of its content, so a remembered text is always the content's."""
    return _NORMALISED.get(oid, content)

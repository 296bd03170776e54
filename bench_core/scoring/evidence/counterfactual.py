"""The counterfactual tree: the agent's tree with the masked parts restored as the masked repository has them,
the rest of the agent's diff kept. A check that passed on the agent's tree is run again on it; if it passes there
too, the pass did not come from the implementation (docs/metrics.md, "Counterfactual").

What is restored, with the project's own masking code (`prepare.stubs`):
- each masked function is stubbed again in the agent's version of its file, as `prepare_workspace` stubs it;
  where that cannot be done (the agent deleted or renamed the function, the file does not parse or is gone) the
  whole file is restored to its masked version (conservative: the agent's changes to that file all count as the
  implementation, so a pass that needs any of them stands, one that needs none does not);
- each masked or removed file (`masking.files`, `masking.remove_also`) is absent again, and each file of an
  extension task's overlay is its base version again, exactly as in the masked repository.
A task with nothing masked has no counterfactual: `restore` says so and the check is recorded as not applicable.
Everything else is the agent's tree as it is, `.git` included, with every modification time kept (the restored
paths and their folders take the times they have in the agent's tree): only the re-stubbed code tells the two
trees apart (docs/metrics.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.prepare.leaks import function_targets, task_path
from failatlas.bench_core.prepare.stubs import StubError, stub_targets
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.paths import inside

COST_NOTE = "runs only after a pass: one more clean re-run (E) and one more hidden-test run (I) per passing run"


MAX_DIGEST_BYTES = 256 * 1024 * 1024


def tree_digest(tree: Path) -> str | None:
    """A content hash of `tree` (paths, file bytes and whether each may be executed, link targets; `.git` left
    out), None past MAX_DIGEST_BYTES: the key under which one scoring batch reuses a check's result for an identical
    tree."""
    digest, total = hashlib.sha256(), 0
    for folder, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, tree).encode("utf-8", "surrogateescape")
            if os.path.islink(path):
                digest.update(b"L\0" + rel + b"\0" + os.readlink(path).encode("utf-8", "surrogateescape") + b"\0")
                continue
            if not os.path.isfile(path):
                continue
            total += os.path.getsize(path)
            if total > MAX_DIGEST_BYTES:
                return None
            kind = b"X" if os.stat(path).st_mode & 0o111 else b"F"  # `./run.sh` runs only where it is executable
            with open(path, "rb") as handle:
                digest.update(kind + b"\0" + rel + b"\0" + hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


@dataclass
class Restored:
    """The counterfactual tree at `path` (None: not applicable), what was restored and how."""

    path: Path | None
    restored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def applicable(self) -> bool:
        return self.path is not None


def masked_paths(task: TaskSpec) -> list[str]:
    """Every file path the masking touches as a whole: masked and removed files, and the overlay's files."""
    paths = list(task.masking.files) + list(task.masking.remove_also)
    if task.masking.overlay:
        overlay = task_path(task, task.masking.overlay, field="masking.overlay").resolve()
        if overlay.is_dir():
            paths += [p.relative_to(overlay).as_posix() for p in sorted(overlay.rglob("*")) if p.is_file()]
    return list(dict.fromkeys(paths))


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _restore_file(tree: Path, pristine: Path, rel: str) -> None:
    """Make `rel` in `tree` what it is in `pristine`: the same file, or absent."""
    target = inside(tree, rel, follow_last=False, field="masking")
    _remove(target)
    source = pristine / rel
    if source.is_file() and not source.is_symlink():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _restub(tree: Path, pristine: Path, rel: str, targets) -> str:
    """Stub `targets` again in the agent's `rel`; returns a note when the whole file had to be restored."""
    target = inside(tree, rel, follow_last=False, field="masking.functions")
    why = None
    if target.is_symlink() or not target.is_file():
        why = "the agent's tree has no such file"
    else:
        try:
            result = stub_targets(target.read_text(encoding="utf-8"), list(targets), filename=rel)
            if len(result.stubbed) < len(targets):
                why = "a masked function is no longer there"
            else:
                target.write_text(result.source, encoding="utf-8")
        except (StubError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
            why = f"its masked functions cannot be stubbed again ({type(exc).__name__}: {str(exc)[:120]})"
    if why is None:
        return ""
    _restore_file(tree, pristine, rel)
    return f"{rel}: {why}; the whole file was restored to its masked version"


def restore(task: TaskSpec, agent_tree: Path, pristine: Path, dest: Path) -> Restored:
    """Build the counterfactual of `agent_tree` (the masked repository `pristine` with the agent's diff) at
    `dest`. Raises InputError when the agent's tree makes it impossible (a masked path reached through a link)."""
    functions = function_targets(task)
    files = masked_paths(task)
    if not functions and not files:
        return Restored(None, notes=["nothing is masked in this task: no counterfactual"])
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(agent_tree, dest, symlinks=True)
    out = Restored(dest)
    for rel in files:
        _restore_file(dest, pristine, rel)
        out.restored.append(rel)
    for rel, targets in functions.items():
        note = _restub(dest, pristine, rel, targets)
        out.restored += [f"{rel}::{t.qualname}" for t in targets]
        if note:
            out.notes.append(note)
    _keep_times(agent_tree, dest, [*files, *functions])
    return out


def _keep_times(agent_tree: Path, dest: Path, paths: list[str]) -> None:
    """Give each restored path of `dest`, and each folder above it, the times it has in `agent_tree`."""
    touched: dict[str, None] = {}
    for rel in paths:
        parts = Path(rel).parts
        touched.update((Path(*parts[:i]).as_posix(), None) for i in range(len(parts), -1, -1))
    for rel in touched:  # all changes are made: setting a time changes no other path's time
        source, target = agent_tree / rel, dest / rel
        try:
            st = os.lstat(source)
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        except (OSError, NotImplementedError):  # absent on either side: nothing to match
            continue



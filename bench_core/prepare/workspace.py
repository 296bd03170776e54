"""The agent's workspace (masked, no history, no ground truth) and the reference workspace (the full tree)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tokenize
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from failatlas.bench_core.prepare.gitrepo import git, init_single_commit, iter_objects
from failatlas.bench_core.prepare.leaks import (
    GroundTruthLeakError,
    find_normalised_leaks,
    function_targets,
    normalised_object,
    task_path,
    task_secrets,
)
from failatlas.bench_core.prepare.stubs import (
    StubError,
    masked_entry,
    parse_masked_entry,
    stub_targets,
    stubbed_correctly,
)
from failatlas.bench_core.tasks.data import is_data_link
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.paths import inside, relative_path, remove_inside

SKIPPED_NAMES = (".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints")
SKIPPED_SUFFIXES = (".pyc", ".pyo")
MAX_COMPILED = 50_000
_COMPILED: dict[tuple[str, bytes], str | None] = {}  # (path, sha256 of content) -> compile error, or None


class PreparedWorkspace(BaseModel):
    """What prepare_workspace built: where, from which task, what it masked and the single commit's id."""

    path: str
    task_id: str
    masked_files: list[str] = Field(default_factory=list)
    masked_functions: list[str] = Field(
        default_factory=list, description="'path::qualname' ('#k' appended: only the k-th of same-named ones)")
    materials: list[str] = Field(default_factory=list, description="files given with the task (paper.txt)")
    removed: list[str] = Field(default_factory=list, description="every path removed, masked files included")
    commit: str
    warnings: list[str] = Field(default_factory=list)


def source_tree(task: TaskSpec, repo: Path | None = None) -> Path:
    """The reference tree: `repo` if given, else the task's bundled `repository.local_path`.

    Raises InputError saying "repository not available" (and how to supply one) when neither is there."""
    if repo is not None:
        repo = Path(repo).resolve()
        if not repo.is_dir():
            raise InputError(f"task {task.id}: the repository given is not a folder", path=str(repo))
        return repo
    bundled = None
    if task.repository.local_path:
        bundled = task_path(task, task.repository.local_path, field="repository.local_path").resolve()
        if bundled.is_dir():
            return bundled
    raise unavailable(task, bundled)


def unavailable(task: TaskSpec, bundled: Path | None = None) -> InputError:
    """The error for a task whose repository is not here: what was looked for, and how to supply it."""
    if bundled is not None:
        missing = f"its bundled copy {bundled} does not exist"
    elif task.repository.url:
        at = f" at commit {task.repository.commit}" if task.repository.commit else ""
        missing = f"its repository {task.repository.url}{at} has no local copy"
    else:
        missing = "the task names no repository"
    return InputError(f"task {task.id}: repository not available: {missing}",
                      hint="pass a local checkout with --repo PATH, or add it to the repository cache with "
                      "`failatlas repos add`")


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in SKIPPED_NAMES or n.endswith(SKIPPED_SUFFIXES)}


def _fresh_dest(dest: Path, source: Path, force: bool, task: TaskSpec) -> Path:
    dest = Path(dest).resolve()
    if dest == source or source in dest.parents or dest in source.parents:
        raise InputError(f"task {task.id}: the workspace must lie outside the reference tree {source}",
                         path=str(dest))
    if dest.exists():
        if not force and not dest.is_dir():
            raise InputError(f"task {task.id}: the workspace path is a file, not a folder", path=str(dest),
                             hint="name a folder, or replace the file with --force (force=True from Python)")
        if not force and any(dest.iterdir()):
            raise InputError(f"task {task.id}: the workspace folder exists and is not empty",
                             path=str(dest), hint="replace it with --force (force=True from Python)")
        if dest.is_dir():
            shutil.rmtree(dest)
        else:
            dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    return dest


def _copy_tree(source: Path, dest: Path, warnings: list[str]) -> None:
    shutil.copytree(source, dest, symlinks=True, ignore=_ignore)
    writable(dest)
    for link in [p for p in dest.rglob("*") if p.is_symlink()]:
        if is_data_link(str(link.readlink())):  # into a data input's read-only mount (tasks/data.py): kept
            continue
        target = (link.parent / link.readlink()).resolve()
        if not target.is_relative_to(dest.resolve()):
            link.unlink()
            warnings.append(f"removed symlink {link.relative_to(dest)} pointing outside the repository")


def writable(root: Path) -> None:
    """Give the owner write permission on `root` and everything under it (links untouched): a repository copied
    from a read-only place (a shared dataset folder, a read-only cache) must still be a tree agents and the
    reference's own runs can write in."""
    for here, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(here, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    os.chmod(root, os.stat(root).st_mode | stat.S_IWUSR)


def reference_workspace(task: TaskSpec, dest: Path, *, repo: Path | None = None, force: bool = False) -> Path:
    """Copy the full reference tree (unmasked, without git history) to `dest`, for validators and gold agents.

    Raises InputError when the source tree is missing or `dest` is not empty (unless `force`).
    """
    source = source_tree(task, repo)
    dest = _fresh_dest(dest, source, force, task)
    _copy_tree(source, dest, [])
    return dest


def _check_relative(task: TaskSpec, rel: str, field: str) -> None:
    try:
        relative_path(rel, field=field)
    except InputError as exc:
        raise InputError(f"task {task.id}: {exc}", hint=exc.hint) from exc


def _check_paths(task: TaskSpec) -> None:
    """Every path the task names inside the repository is relative, without '..' (a spec from an older store or
    built in code is checked here too): nothing outside the workspace is ever removed or written."""
    for rel in task.masking.files:
        _check_relative(task, rel, "masking.files")
    for rel in task.masking.remove_also:
        _check_relative(task, rel, "masking.remove_also")
    for ref in task.masking.functions:
        _check_relative(task, ref.path, "masking.functions")
    if task.run.results_file:
        _check_relative(task, task.run.results_file, "run.results_file")
    for rel in task.materials:
        _check_relative(task, rel, "materials")


def _apply_overlay(task: TaskSpec, dest: Path) -> list[str]:
    if not task.masking.overlay:
        return []
    overlay = task_path(task, task.masking.overlay, field="masking.overlay").resolve()
    if not overlay.is_dir():
        raise InputError(f"task {task.id}: the overlay folder does not exist", path=str(overlay),
                         field="masking.overlay")
    replaced = []
    for file in sorted(p for p in overlay.rglob("*") if p.is_file() and not _ignore("", [p.name])):
        rel = file.relative_to(overlay)
        if not file.resolve().is_relative_to(overlay):
            raise InputError(f"task {task.id}: {rel} in the overlay is a link leading outside it", path=str(file),
                             field="masking.overlay")
        target = inside(dest, rel.as_posix(), follow_last=False, field="masking.overlay")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        shutil.copy2(file, target)
        replaced.append(rel.as_posix())
    return replaced


def _stub_all(task: TaskSpec, dest: Path, warnings: list[str]) -> list[str]:
    """Stub the task's masked functions in `dest`; return their `path::qualname` entries."""
    masked = []
    for rel, targets in function_targets(task).items():
        target = inside(dest, rel, field="masking.functions")
        if not target.is_file():
            raise InputError(f"task {task.id}: the file of a masked function does not exist", path=rel,
                             field="masking.functions")
        encoding = _source_encoding(target)
        try:
            result = stub_targets(target.read_text(encoding=encoding), targets, filename=rel)
        except (StubError, UnicodeDecodeError) as exc:
            raise InputError(f"task {task.id}: {exc}", path=rel, field="masking.functions") from exc
        target.write_text(result.source, encoding=encoding, errors="backslashreplace")
        warnings.extend(result.notes)
        masked.extend(masked_entry(rel, stubbed) for stubbed in result.stubbed)
    return masked


def _source_encoding(path: Path) -> str:
    """The encoding Python reads `path` with (its coding cookie, else UTF-8)."""
    with path.open("rb") as file:
        try:
            return tokenize.detect_encoding(file.readline)[0]
        except SyntaxError:
            return "utf-8"


def _add_materials(task: TaskSpec, dest: Path) -> list[str]:
    """Copy the task's materials (the paper) into `dest`; InputError for a missing material or one that would
    replace a repository file."""
    added = []
    for rel, src in sorted(task.materials.items()):
        source = task_path(task, src, field=f"materials.{rel}")
        if not source.is_file():
            raise InputError(f"task {task.id}: the material {src} does not exist", path=str(source),
                             field=f"materials.{rel}")
        target = inside(dest, rel, follow_last=False, field=f"materials.{rel}")
        if target.exists() or target.is_symlink():
            raise InputError(f"task {task.id}: the material {rel} would replace the repository's own {rel}",
                             field=f"materials.{rel}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        added.append(rel)
    return added


def _compile_all(dest: Path, stubbed_paths: set[str], warnings: list[str]) -> None:
    for file in sorted(dest.rglob("*.py")):
        if file.is_symlink() or not file.is_file() or ".git" in file.relative_to(dest).parts:  # never followed
            continue
        rel = file.relative_to(dest).as_posix()
        error = _compile_error(rel, file.read_bytes())
        if error is None:
            continue
        if rel in stubbed_paths:
            raise InputError(f"stubbed file does not compile: {error}", path=rel)
        warnings.append(f"{rel} does not compile as Python 3 (left as it was): {error}")


def _compile_error(rel: str, data: bytes) -> str | None:
    """Why `data` does not compile as Python 3 (None when it does). Remembered by path and content: one
    repository is prepared for many tasks, and compiling it is a large part of the time that takes."""
    key = (rel, hashlib.sha256(data).digest())
    if key not in _COMPILED:
        if len(_COMPILED) >= MAX_COMPILED:
            _COMPILED.clear()
        try:
            compile(data, rel, "exec", dont_inherit=True)
            _COMPILED[key] = None
        except (SyntaxError, ValueError) as exc:
            _COMPILED[key] = str(exc)
    return _COMPILED[key]


def _outside_hint(task: TaskSpec) -> str:
    """What the user can edit to name a task's files to hide inside the repository (R6): for an EXP-Bench task,
    the field of its question in EXP-Bench's own JSON, which is all such a user has; else the task file."""
    if task.benchmark == "expbench" and task.source:
        index = task.extra.get("question_index")
        field = {"T1": "masked_source", "T2": "source"}.get(task.kind.value, "masked_source")
        where = f"questions[{index}].{field}" if isinstance(index, int) else field
        return (f"in {task.source}, {where} names them; write each as its path in the repository "
                f"(/workspace/<path from the repository root>), then `failatlas tasks import {task.source}` again")
    return "name them by their path in the repository in the task file (masking.files)"


def prepare_workspace(task: TaskSpec, dest: Path, *, repo: Path | None = None,
                      force: bool = False) -> PreparedWorkspace:
    """Build the tree an agent works in: masked, compiled, one fresh commit, and free of ground truth.

    Copies the reference tree (`repo`, else the task's bundled repository) without `.git`, removes masked
    files, `masking.remove_also` and any stale results file, lays the base-version overlay of an extension
    task over it, stubs masked functions (located by qualname, or by their lines with the name checked; a
    given docstring replaces the original), compiles every .py file, copies the task's materials (the paper) in,
    then commits everything as the only commit of a new repository. Raises InputError when the repository is
    not available (saying how to supply it), for files to hide named outside the repository
    (`masking.outside`), for a masked path or function that does not exist or a masked
    function whose lines hold another one, for a material that would replace a repository file, for a path
    the task names that is absolute, holds '..' or leaves its folder through a link (a bundled repository or
    overlay outside the task's folder, a results or masked file outside the repository), and
    GroundTruthLeakError if the answer, a hidden test, the task spec or masked code can still be found in
    the tree or its git objects. On any error the half-built `dest` is deleted.
    """
    _check_paths(task)
    source = source_tree(task, repo)
    if task.masking.outside:  # the answer could sit anywhere in the repository given: never hand it over
        raise InputError(f"task {task.id}: {len(task.masking.outside)} file(s) to hide are named outside the "
                         f"repository ({', '.join(task.masking.outside[:3])}), so they cannot be removed from the "
                         "agent's workspace", field="masking.outside", hint=_outside_hint(task))
    for rel in task.masking.files:
        if not (source / rel).exists():
            raise InputError(f"task {task.id}: a masked file does not exist in the repository", path=rel,
                             field="masking.files")
    dest = _fresh_dest(dest, source, force, task)
    try:
        return _build(task, source, dest)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def _build(task: TaskSpec, source: Path, dest: Path) -> PreparedWorkspace:
    warnings: list[str] = []
    removed: list[str] = []
    _copy_tree(source, dest, warnings)
    for rel in task.masking.files:
        remove_inside(dest, rel, field="masking.files")
        removed.append(rel)
    for rel in task.masking.remove_also:
        if remove_inside(dest, rel, field="masking.remove_also"):
            removed.append(rel)
        else:
            warnings.append(f"remove_also path {rel} does not exist in the repository")
    results_file = task.run.results_file
    if results_file and inside(dest, results_file, follow_last=False).is_file():
        remove_inside(dest, results_file, field="run.results_file")
        removed.append(results_file)
        warnings.append(f"removed {results_file} found in the reference tree: it holds expected outputs")
    overlaid = _apply_overlay(task, dest)
    if overlaid:
        warnings.append(f"replaced with the base version: {', '.join(overlaid)}")
    masked_functions = _stub_all(task, dest, warnings)
    _compile_all(dest, {m.split("::")[0] for m in masked_functions}, warnings)
    materials = _add_materials(task, dest)
    commit = init_single_commit(dest)
    _assert_clean(task, source, dest, masked_functions, warnings, materials)
    return PreparedWorkspace(path=str(dest), task_id=task.id, masked_files=list(task.masking.files),
                             masked_functions=masked_functions, materials=materials, removed=removed,
                             commit=commit, warnings=warnings)


def _assert_clean(task: TaskSpec, source: Path, dest: Path, masked_functions: list[str],
                  warnings: list[str], materials: list[str]) -> None:
    """Raise GroundTruthLeakError if the prepared tree or its git objects hold ground truth. A material (the
    paper) is given on purpose: ground truth found in it is a warning."""
    problems = []
    if git(dest, "status", "--porcelain", "--ignored").strip():
        problems.append("files outside the single commit")
    for rel in task.masking.files:
        if (dest / rel).exists():
            problems.append(f"masked file {rel} is present")
    for entry in masked_functions:
        rel, qualname, occurrence = parse_masked_entry(entry)
        if not stubbed_correctly((dest / rel).read_text(encoding=_source_encoding(dest / rel)), qualname,
                                 occurrence):
            problems.append(f"{entry} is not stubbed")
    secrets = task_secrets(task, source)
    warnings.extend(f"too short to scan for leaks: {label}" for label in secrets.skipped)
    given = _blob_ids(dest, materials)
    commits: list[str] = []  # every commit object, reachable or not: counted by the scan, not by another git process

    def documents() -> Iterator[tuple[str, str]]:
        for oid, kind, content in iter_objects(dest):
            if kind == "commit":
                commits.append(oid)
            yield given.get(oid, f"git {kind} {oid}"), normalised_object(oid, content)

    for where, secret in find_normalised_leaks(documents(), secrets.secrets):
        if secret.hard and where not in given.values():
            problems.append(f"{secret.label} found in {where}")
        else:
            warnings.append(f"possible leak: {secret.label} found in {where}")
    if len(commits) != 1:
        problems.insert(0, "the repository has more than one commit")
    if problems:
        raise GroundTruthLeakError(f"task {task.id}: the prepared workspace {dest} leaks ground truth: "
                                   + "; ".join(problems[:10]) + (" ..." if len(problems) > 10 else ""))


def _blob_ids(dest: Path, materials: list[str]) -> dict[str, str]:
    """git blob id -> 'material <path>' for each material committed in `dest`."""
    if not materials:
        return {}
    ids = git(dest, "rev-parse", *(f"HEAD:{rel}" for rel in materials)).decode().split()
    return {oid: f"material {rel}" for oid, rel in zip(ids, materials, strict=True)}

"""A reference the user gives where the benchmark gives none (issue 52, R3): RExBench publishes no solution and
EXP-Bench no command, so their tasks could never be `valid`.

- `--reference-command CMD`: the command that runs the reference and prints its results, for each selected task
  whose benchmark gives none (`run.command`). Gold then writes it as its run script and the clean re-run checks
  execution; with `--expected-from-reference` its printed numbers become the expected values.
- `--reference PATH`: the reference version of an extension task's repository (RExBench gives only the base),
  a tree or a patch (`git apply`) against the task's repository. The task then gets that tree as its repository
  (through the repository cache, pinned by its content), the base versions of the files it changes as its
  overlay and the files it adds as files to hide: the agent still gets the base, gold restores the reference,
  and derived tests are recorded from it.

Both are recorded with the task in the catalog (`extra.reference`: what was given, its digest, when) and warn
`reference-from-user`, so every later run and score uses the same reference and says whose it is.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from failatlas.bench_core.tasks.model import TaskKind, TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.store import Store

KEY = "reference"
WARNING = "reference-from-user"
_SKIP = {".git", "__pycache__"}


def _files(root: Path) -> dict[str, Path]:
    out = {}
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP)
        for name in files:
            path = Path(here) / name
            if not path.is_symlink():
                out[path.relative_to(root).as_posix()] = path
    return out


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for rel, path in sorted(_files(root).items()):
        h.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def bundle_name(task_id: str, digest: str) -> str:
    """The folder name of a task's reference bundle: the id as a slug (letters, digits, `.`, `_`, `-`; never a
    path: no `/`, no `..`) and the digest."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", task_id)[:80].strip(".-") or "task"
    return f"{slug}-{digest}"


def reference_tree(base: Path, given: Path, scratch: Path) -> Path:
    """The reference tree: `given` when it is a folder, else `base` with the patch `given` applied (in `scratch`).
    InputError naming the file when the patch does not apply."""
    given = Path(given).resolve()
    if given.is_dir():
        return given
    if not given.is_file():
        raise InputError("no such folder or patch file", path=str(given), field="--reference")
    tree = scratch / "reference"
    shutil.copytree(base, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    res = subprocess.run(["git", "apply", "--whitespace=nowarn", str(given)], cwd=tree,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    if res.returncode != 0:
        raise InputError(f"the patch does not apply to the task's repository: {res.stderr.strip()[-300:]}",
                         path=str(given), field="--reference")
    return tree


def with_reference(store: Store, task: TaskSpec, base: Path, given: Path) -> TaskSpec:
    """`task` (an extension task on its base repository `base`) with the reference `given` (a tree or a patch):
    saved in the catalog and its tree bound to the task in the repository cache. InputError when the task is no
    extension task, the reference changes nothing, or deletes a file of the base (an overlay cannot say that)."""
    from failatlas.bench_core.repos import AddParams, add
    from failatlas.bench_core.tasks.catalog import save_tasks

    if task.kind != TaskKind.EXTENSION:
        raise InputError(f"task {task.id} is not an extension task: its reference is its repository",
                         field="--reference", hint="use --reference-command for a task without a command")
    with tempfile.TemporaryDirectory(prefix="failatlas-reference-") as tmp:
        tree = reference_tree(base, given, Path(tmp))
        ref_files, base_files = _files(tree), _files(base)
        gone = sorted(set(base_files) - set(ref_files))
        if gone:
            raise InputError(f"the reference deletes {len(gone)} file(s) of the base ({', '.join(gone[:3])}); a "
                             "task's base version cannot say that", path=str(given), field="--reference")
        changed = sorted(r for r in base_files if not filecmp.cmp(base_files[r], ref_files[r], shallow=False))
        added = sorted(set(ref_files) - set(base_files))
        if not (changed or added):
            raise InputError("the reference is the task's repository itself: nothing to restore",
                             path=str(given), field="--reference")
        digest = _digest(tree)
        references = Path(store.path).resolve().parent / "references"
        bundle = references / bundle_name(task.id, digest[:12])
        if bundle.parent != references:  # cannot happen with a slug; a guard against a later change of it
            raise InputError(f"task id {task.id!r} cannot name a reference folder", field="--task")
        if not bundle.is_dir():
            part = bundle.with_name(bundle.name + f".part-{os.getpid()}")
            shutil.rmtree(part, ignore_errors=True)
            for rel in changed:
                (part / "base" / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(base_files[rel], part / "base" / rel)
            (part / "base").mkdir(parents=True, exist_ok=True)
            (part / "task.json").write_text(json.dumps({"task": task.id, "reference": str(given)}))
            part.rename(bundle)
        add(store, AddParams(source=str(tree), task_ids=[task.id]))
    mutants = _mutants_into(bundle, task)
    made = {"given": str(Path(given).resolve()), "kind": "tree" if Path(given).is_dir() else "patch",
            "digest": digest, "changed": changed, "added": added, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                     time.gmtime())}
    updated = task.model_copy(update={
        "source": str(bundle / "task.json"),
        "method_mutants": mutants,
        "masking": task.masking.model_copy(update={"overlay": "base",
                                                   "files": sorted({*task.masking.files, *added})}),
        "extra": {**task.extra, KEY: {**(task.extra.get(KEY) or {}), "tree": made}},
        "warnings": [*[w for w in task.warnings if not w.startswith(f"{WARNING}: tree")],
                     f"{WARNING}: tree {made['given']} ({len(changed)} changed, {len(added)} added file(s))"]})
    save_tasks(store, [updated], source="tasks validate --reference")
    return updated


def _mutants_into(bundle: Path, task: TaskSpec) -> list:
    """The task's declared method mutants with their sources copied into `bundle` (named by content), since the
    task's file becomes the bundle's `task.json` and a task file names only paths inside its folder."""
    from failatlas.bench_core.tasks.paths import task_path

    out = []
    for i, spec in enumerate(task.method_mutants):
        replace = []
        for j, item in enumerate(spec.replace):
            source = task_path(task, item.source, field=f"method_mutants[{i}].replace[{j}].source")
            data = source.read_bytes()
            copy = bundle / "method_mutants" / f"{hashlib.sha256(data).hexdigest()[:12]}-{source.name}"
            if not copy.is_file():
                copy.parent.mkdir(exist_ok=True)
                part = copy.with_name(copy.name + f".part-{os.getpid()}")
                part.write_bytes(data)
                part.replace(copy)
            replace.append(item.model_copy(update={"source": str(copy)}))
        out.append(spec.model_copy(update={"replace": replace}))
    return out


def with_command(store: Store, task: TaskSpec, command: str) -> TaskSpec:
    """`task` with `command` as its reference command, saved in the catalog (a task whose benchmark gives one
    keeps it: InputError)."""
    from failatlas.bench_core.tasks.catalog import save_tasks

    mine = (task.extra.get(KEY) or {}).get("command")
    if task.run.command and not mine:
        raise InputError(f"task {task.id} has its benchmark's own command ({task.run.command[:80]!r})",
                         field="--reference-command", hint="leave the task out of the selection (--task)")
    if mine == command:
        return task
    updated = task.model_copy(update={
        "run": task.run.model_copy(update={"command": command}),
        "extra": {**task.extra, KEY: {**(task.extra.get(KEY) or {}), "command": command,
                                      "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}},
        "warnings": [*[w for w in task.warnings if not w.startswith(f"{WARNING}: command")],
                     f"{WARNING}: command {command[:200]!r}"]})
    save_tasks(store, [updated], source="tasks validate --reference-command")
    return updated


def attach(store: Store, tasks: list[TaskSpec], *, reference: Path | None, command: str | None,
           repo: Path | None) -> list[TaskSpec]:
    """`tasks` with the user's reference (`with_reference`) and command (`with_command`, only for those whose
    benchmark gives none) saved and applied. ConfigError for --reference with --repo (the base then comes from
    the repository cache: `repos add BASE --task ID`)."""
    from failatlas.bench_core.repos import repository_for
    from failatlas.bench_core.tasks.paths import task_path
    from failatlas.core.errors import ConfigError

    if reference is not None and repo is not None:
        raise ConfigError("--reference takes the task's base from the repository cache, not --repo",
                          hint="register the base with `failatlas repos add BASE --task ID` and leave out --repo")
    out = []
    for task in tasks:
        if reference is not None:
            cached = repository_for(store, task)
            base = cached.path if cached is not None else (
                task_path(task, task.repository.local_path, field="repository.local_path")
                if task.repository.local_path else None)
            if base is None or not Path(base).is_dir():
                raise InputError(f"task {task.id}: no base repository to lay the reference over",
                                 hint=f"failatlas repos add BASE --task {task.id}")
            if not (task.extra.get(KEY) or {}).get("tree"):
                task = with_reference(store, task, Path(base), reference)
        masks = bool(task.masking.files or task.masking.functions or task.masking.overlay)
        # a task that masks nothing (EXP-Bench's T3) has no implementation a run of the reference could check
        if command is not None and masks and (not task.run.command or (task.extra.get(KEY) or {}).get("command")):
            task = with_command(store, task, command)
        out.append(task)
    return out

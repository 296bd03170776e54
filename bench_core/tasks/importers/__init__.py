"""Task importers, each registered by format name in `TASK_IMPORTERS`, and finding what to import under a path.

An importer (see `failatlas.core.importers` for the shape) reads files or task folders and never touches the
store. Adding a format: a module whose importer class registers itself with `@TASK_IMPORTERS.register(name)`,
plus its import line here. `discover()` walks files and folders and pairs each importable item with its format.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from failatlas.bench_core.tasks.importers import autoexperiment, expbench, rexbench, suite  # noqa: F401  (register)
from failatlas.bench_core.tasks.importers._common import TASK_IMPORTERS, load_json
from failatlas.core.errors import InputError
from failatlas.core.importers import AUTO, check_input, import_root, iter_lines, parse_json


@dataclass(frozen=True)
class Found:
    """Something to import: a file or task folder and its format."""

    path: Path
    format: str


@dataclass(frozen=True)
class Discovery:
    found: list[Found]
    skipped: list[Path]


def _raise_if_broken(path: Path) -> None:
    """A JSON or JSONL file that does not parse (or is too large to read) is an error, never silently skipped."""
    if path.suffix.lower() == ".json":
        load_json(path)
    elif path.suffix.lower() == ".jsonl":
        for number, line in iter_lines(path):
            if line.strip():
                parse_json(line, path, line=number)


def _root(name: str, path: Path) -> Path:
    root = getattr(TASK_IMPORTERS.get(name), "root", None)
    return root(path) if root else path


def discover(paths: Iterable[str | Path], fmt: str = AUTO) -> Discovery:
    """Files and task folders to import under `paths` (folders are walked), each with its format.

    A path named on the command line must be importable (InputError otherwise); files met while walking a
    folder that no importer recognises are listed in `skipped`. A file of an importable suffix that is not a
    regular file (a FIFO, a device), and a file or folder that is a link leading out of the folder being
    imported (a named file's own folder), is an InputError naming it. ConfigError for an unknown format.
    """
    TASK_IMPORTERS.check_format(fmt)
    importers = TASK_IMPORTERS.in_sniff_order() if fmt == AUTO else [TASK_IMPORTERS.get(fmt)]
    suffixes = TASK_IMPORTERS.suffixes()  # with another --format, a broken file of these is still an error
    found: list[Found] = []
    skipped: list[Path] = []
    seen: set[Path] = set()

    def add(path: Path, name: str) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            found.append(Found(path, name))

    def classify(path: Path) -> str | None:
        return next((imp.name for imp in importers if imp.sniff(path)), None)

    def walk(folder: Path, root: Path) -> None:
        claimed = classify(folder)
        if claimed is not None:  # a task folder (or a suite of them) is imported whole
            add(folder, claimed)
            return
        here: list[Found] = []
        for child in sorted(folder.iterdir()):
            if child.name.startswith("."):
                continue
            if child.is_dir():
                check_input(child, (root,), regular=False)
                walk(child, root)
            elif child.suffix.lower() in suffixes:
                check_input(child, (root,))
                name = classify(child)
                if name is None:
                    _raise_if_broken(child)
                    skipped.append(child)
                else:
                    here.append(Found(child, name))
        kept: set[Path] = set()
        for name in {item.format for item in here}:
            files = [item.path for item in here if item.format == name]
            keep = getattr(TASK_IMPORTERS.get(name), "keep", None)
            kept.update(keep(files) if keep else files)
        for item in here:
            if item.path in kept:
                add(item.path, item.format)
            else:
                skipped.append(item.path)

    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InputError("no such file or folder", path=str(path))
        if path.is_dir():
            walk(path, import_root(path))
            continue
        check_input(path, (import_root(path),))
        name = classify(path)
        if name is None:
            if fmt != AUTO:
                add(path, fmt)  # the loader names what is wrong with it
                continue
            _raise_if_broken(path)
            raise InputError(
                "cannot tell the task format of this file",
                path=str(path),
                hint="pass --format " + "|".join(TASK_IMPORTERS.names()),
            )
        add(_root(name, path), name)
    return Discovery(found, skipped)


__all__ = ["TASK_IMPORTERS", "Discovery", "Found", "discover"]

"""Task importers by format name, and finding what to import under a path.

Each importer is a `load_<format>(path) -> list[TaskSpec]` that reads files and never touches the store, plus
a `sniff(path) -> bool` that recognises its format by content. `discover()` walks files and folders and pairs
each importable item with its format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from failatlas.bench_core.tasks.importers import autoexperiment, expbench, rexbench
from failatlas.bench_core.tasks.importers._common import load_json, read_text
from failatlas.bench_core.tasks.importers.autoexperiment import load_autoexperiment
from failatlas.bench_core.tasks.importers.expbench import load_expbench
from failatlas.bench_core.tasks.importers.rexbench import load_rexbench
from failatlas.bench_core.tasks.model import TaskSpec

from failatlas.core.errors import ConfigError, InputError


@dataclass(frozen=True)
class Importer:
    """A task format: its name, loader and content sniffer."""

    name: str
    load: Callable[[Path], list[TaskSpec]]
    sniff: Callable[[Path], bool]
    description: str


IMPORTERS: dict[str, Importer] = {
    expbench.FORMAT: Importer(
        expbench.FORMAT,
        load_expbench,
        expbench.sniff,
        "EXP-Bench *_complete_final*.json files (one per paper)",
    ),
    autoexperiment.FORMAT: Importer(
        autoexperiment.FORMAT,
        load_autoexperiment,
        autoexperiment.sniff,
        "AutoExperiment rows (JSONL, or a JSON list)",
    ),
    rexbench.FORMAT: Importer(
        rexbench.FORMAT,
        load_rexbench,
        rexbench.sniff,
        "RExBench task folders (instructions.md + task.json/yaml + oracle.json)",
    ),
}
FORMATS = ("auto", *IMPORTERS)
_CANDIDATE_SUFFIXES = (".json", ".jsonl")


def get_importer(name: str) -> Importer:
    """The importer registered as `name`; ConfigError listing the known ones otherwise."""
    try:
        return IMPORTERS[name]
    except KeyError:
        raise ConfigError(f"unknown task format '{name}'", hint="use one of: " + ", ".join(FORMATS)) from None


def detect_format(path: Path) -> str | None:
    """The format whose sniffer recognises `path`, or None."""
    for importer in IMPORTERS.values():
        if importer.sniff(path):
            return importer.name
    return None


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
    """A JSON or JSONL file that does not parse is an error, never silently skipped."""
    if path.suffix.lower() == ".json":
        load_json(path)
    elif path.suffix.lower() == ".jsonl":
        for number, line in enumerate(read_text(path).splitlines(), start=1):
            if line.strip():
                try:
                    json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"invalid JSON: {exc.msg} (column {exc.colno})", path=str(path), line=number
                    ) from exc


def discover(paths: Iterable[str | Path], fmt: str = "auto") -> Discovery:
    """Files and task folders to import under `paths` (folders are walked), each with its format.

    A path named on the command line must be importable (InputError otherwise); files met while walking a
    folder that no importer recognises are listed in `skipped`.
    """
    if fmt != "auto":
        get_importer(fmt)
    found: list[Found] = []
    skipped: list[Path] = []
    seen: set[Path] = set()

    def add(path: Path, name: str) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            found.append(Found(path, name))

    def classify(path: Path) -> str | None:
        if fmt != "auto":
            return fmt if IMPORTERS[fmt].sniff(path) else None
        return detect_format(path)

    def walk(folder: Path) -> None:
        if rexbench.task_folder(folder) is not None and fmt in ("auto", rexbench.FORMAT):
            add(folder, rexbench.FORMAT)
            return
        here: list[Found] = []
        for child in sorted(folder.iterdir()):
            if child.name.startswith("."):
                continue
            if child.is_dir():
                walk(child)
            elif child.suffix.lower() in _CANDIDATE_SUFFIXES:
                name = classify(child)
                if name is None:
                    _raise_if_broken(child)
                    skipped.append(child)
                else:
                    here.append(Found(child, name))
        # EXP-Bench log folders also hold intermediate task files; its final ones are named *_complete_final*
        finals = any(f.format == expbench.FORMAT and expbench.FINAL_MARK in f.path.name for f in here)
        for item in here:
            if finals and item.format == expbench.FORMAT and expbench.FINAL_MARK not in item.path.name:
                skipped.append(item.path)
            else:
                add(item.path, item.format)

    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InputError("no such file or folder", path=str(path))
        if path.is_dir():
            walk(path)
            continue
        name = classify(path)
        if name is None:
            if fmt != "auto":
                add(path, fmt)  # the loader names what is wrong with it
                continue
            _raise_if_broken(path)
            raise InputError(
                "cannot tell the task format of this file",
                path=str(path),
                hint="pass --format " + "|".join(IMPORTERS),
            )
        add(rexbench.task_folder(path) or path if name == rexbench.FORMAT else path, name)
    return Discovery(found, skipped)


__all__ = [
    "FORMATS",
    "IMPORTERS",
    "Discovery",
    "Found",
    "Importer",
    "detect_format",
    "discover",
    "get_importer",
    "load_autoexperiment",
    "load_expbench",
    "load_rexbench",
]

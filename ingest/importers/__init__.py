"""Importers of other tools' files, registered by format name; `import_insights` over files and folders."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from failatlas.ingest.importers.base import Importer, ImportOptions, ParsedFile
from failatlas.ingest.importers.expbench import ExpBenchImporter
from failatlas.ingest.importers.generic import CsvImporter, JsonlImporter
from failatlas.ingest.importers.inspect_log import InspectImporter
from failatlas.ingest.importers.trail import TrailImporter
from failatlas.ingest.model import FileReport, IngestReport
from failatlas.ingest.writer import write_insights
from pydantic import ValidationError

from failatlas.core.errors import InputError
from failatlas.core.store import Store

IMPORTERS: dict[str, Importer] = {
    importer.name: importer
    for importer in (InspectImporter(), TrailImporter(), ExpBenchImporter(), JsonlImporter(), CsvImporter())
}
# Tried in this order when the format is "auto": the specific formats before the generic ones.
DETECTION_ORDER = ("inspect", "trail", "expbench", "csv", "jsonl")
FORMATS = ("auto", *IMPORTERS)
IMPORTABLE_SUFFIXES = {".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".eval"}
_HEAD_BYTES = 65536


def detect_format(path: Path) -> str:
    """The format of a file, from its suffix and its first bytes; raises InputError when none fits."""
    if path.suffix.lower() == ".eval":
        return "inspect"
    with open(path, "rb") as handle:
        head = handle.read(_HEAD_BYTES).decode("utf-8-sig", errors="replace")
    for name in DETECTION_ORDER:
        if IMPORTERS[name].sniff(path, head):
            return name
    raise InputError(
        "cannot tell the format of this file",
        path=str(path),
        hint=f"pass --format ({', '.join(IMPORTERS)}); files of the supported formats end in "
        + ", ".join(sorted(IMPORTABLE_SUFFIXES)),
    )


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named, plus importable files under folders named (recursive, sorted, hidden ones skipped)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix.lower() in IMPORTABLE_SUFFIXES
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                raise InputError(
                    "the folder holds no importable files",
                    path=str(path),
                    hint="supported: " + ", ".join(sorted(IMPORTABLE_SUFFIXES)),
                )
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError("no such file or folder", path=str(path))
    seen: set[Path] = set()
    return [p for p in files if not (p.resolve() in seen or seen.add(p.resolve()))]


def parse_file(path: Path, fmt: str = "auto", options: ImportOptions | None = None) -> ParsedFile:
    """Read and validate one file without touching the store; raises InputError naming file and line."""
    options = options or ImportOptions()
    if fmt != "auto" and fmt not in IMPORTERS:
        raise InputError(f"unknown format {fmt!r}", hint=f"choose one of {', '.join(FORMATS)}")
    name = detect_format(path) if fmt == "auto" else fmt
    return IMPORTERS[name].parse(path, options)


def import_insights(
    store: Store,
    path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    fmt: str = "auto",
    text_field: str = "description",
    text_column: str = "text",
    phase_column: str = "phase",
    label_column: str = "label",
    default_phase: str = "other",
    inspect_pass_threshold: float = 1.0,
) -> IngestReport:
    """Import raw insights from files or folders of any supported format.

    All-or-nothing: every file is parsed and validated first; if any has a bad row, InputError names the file,
    line and field (of the first problem, with the others listed) and the store is left unchanged. Otherwise
    one transaction stores the occurrences not stored before. Re-importing the same files adds nothing.
    """
    try:
        options = ImportOptions(
            text_field=text_field,
            text_column=text_column,
            phase_column=phase_column,
            label_column=label_column,
            default_phase=default_phase,
            inspect_pass_threshold=inspect_pass_threshold,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(first["msg"].removeprefix("Value error, "), field=str(first["loc"][0])) from exc
    paths = [path] if isinstance(path, str | os.PathLike) else list(path)
    files = expand_paths(paths)
    parsed: list[ParsedFile] = []
    errors: list[InputError] = []
    for file in files:
        try:
            parsed.append(parse_file(file, fmt, options))
        except InputError as exc:
            errors.append(exc)
    if errors:
        first = errors[0]
        if len(errors) > 1:
            first.hint = (first.hint + "; " if first.hint else "") + (
                f"{len(errors) - 1} other file(s) also have problems: "
                + ", ".join(str(e.path) for e in errors[1:6])
            )
        raise first
    report = IngestReport()
    insights = []
    for item in parsed:
        report.files.append(
            FileReport(
                path=str(item.path),
                format=item.format,
                occurrences=len(item.insights),
                warnings=item.warnings,
            )
        )
        report.warnings.extend(item.warnings)
        report.skipped.extend(item.skipped)
        insights.extend(item.insights)
    report.occurrences = len(insights)
    params: dict[str, Any] = {
        "paths": [str(p.resolve()) for p in files],
        "format": fmt,
        **options.model_dump(),
    }
    new = write_insights(store, insights, report, stage="ingest.file", params=params)
    new_per_file = Counter(insight.source_file for insight in new)
    for file_report in report.files:
        file_report.new_occurrences = new_per_file.get(file_report.path, 0)
    return report

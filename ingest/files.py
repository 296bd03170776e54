"""The `ingest.file` stage: raw insights from other tools' files, all or nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from failatlas.core.errors import InputError
from failatlas.core.importers import Loaded, check_input, import_root, reading_inside
from failatlas.core.stages import stage_run
from failatlas.core.store import Store
from failatlas.ingest.importers import INSIGHT_IMPORTERS
from failatlas.ingest.importers.base import check_insight_lengths
from failatlas.ingest.model import FileIngestParams, FileReport, IngestResult, RawInsight
from failatlas.ingest.writer import write_insights


def _shown(path: Path) -> str:
    """`path` as printable text: bytes of a name that are not UTF-8 as backslash escapes."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _check_name(path: Path) -> None:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError("the file name is not UTF-8 text, so it cannot be recorded as the insights' source",
                         path=_shown(path), hint="rename the file (or folder)") from exc


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files named, plus the files under folders named (recursive, sorted, hidden ones skipped) whose suffix
    some insight importer reads. Raises InputError for a missing path, a folder with nothing to import, a file
    name that is not UTF-8, and a file to import that is not a regular file (a FIFO, a device) or is a link
    leading out of the folder imported (a named file's own folder)."""
    suffixes = INSIGHT_IMPORTERS.suffixes()
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            root = import_root(path)
            found = sorted(
                p
                for p in path.rglob("*")
                if p.suffix.lower() in suffixes
                and not p.is_dir()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            for file in found:
                _check_name(file)
                check_input(file, (root,))
            if not found:
                raise InputError("the folder holds no importable files", path=_shown(path),
                                 hint="supported: " + ", ".join(sorted(suffixes)))
            files.extend(found)
        elif path.exists():
            _check_name(path)
            check_input(path, (import_root(path),))
            files.append(path)
        else:
            raise InputError("no such file or folder", path=_shown(path))
    seen: set[Path] = set()
    return [p for p in files if not (p.resolve() in seen or seen.add(p.resolve()))]


def _load_all(files: list[Path], params: FileIngestParams) -> list[Loaded[RawInsight]]:
    loaded: list[Loaded[RawInsight]] = []
    errors: list[InputError] = []
    for file in files:
        try:
            item = INSIGHT_IMPORTERS.load(file, params.format, params.options)
            check_insight_lengths(item.records, file)
            loaded.append(item)
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
    return loaded


def _roots(params: FileIngestParams) -> list[Path]:
    """What this import may read through links: the imported folders (a named file's folder) and files its
    options name."""
    roots = [import_root(p) for p in params.paths]
    for value in params.options.values():
        if isinstance(value, str | Path) and str(value) and Path(value).exists():
            roots.append(Path(value).resolve())
    return roots


def run_file(store: Store, params: FileIngestParams) -> IngestResult:
    """Import raw insights from files or folders of any registered format (`params.format`, or detected).

    All-or-nothing: every file is read and validated first; if any has a bad row, or passes a cap (a line,
    an insight's length, a document's or archive member's size: see docs/store/ingest.md), InputError names the
    file, line and field (of the first problem, the other files listed) and no insight is written. Otherwise one
    transaction stores the occurrences not stored before, with this run's `stage_runs` row. Re-importing the
    same files adds nothing. Raises ConfigError for an unknown format or option.
    """
    INSIGHT_IMPORTERS.check_format(params.format)
    INSIGHT_IMPORTERS.check_options(params.options, params.format)
    files = expand_paths(params.paths)
    recorded = params.model_copy(update={"paths": [p.resolve() for p in files]})
    with stage_run(store, "ingest.file", recorded) as run:
        result = IngestResult()
        insights: list[RawInsight] = []
        with reading_inside(_roots(params)):
            loaded = _load_all(files, params)
        for item in loaded:
            result.files.append(FileReport(path=str(item.path), format=item.format,
                                           occurrences=len(item.records), warnings=item.warnings))
            result.warnings.extend(item.warnings)
            result.skipped.extend(item.skipped)
            insights.extend(item.records)
        new = write_insights(store, insights, result, run)
    new_per_file = Counter(insight.source_file for insight in new)
    for file_report in result.files:
        file_report.new_occurrences = new_per_file.get(file_report.path, 0)
    return result

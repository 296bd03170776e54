"""The `tasks.import` stage: tasks of other benchmarks' files (or FailAtlas task folders) into the catalog."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError

from failatlas.bench_core.tasks import paper_file
from failatlas.bench_core.tasks.catalog import FileReport, save_tasks
from failatlas.bench_core.tasks.importers import TASK_IMPORTERS, Found, discover
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.importers import AUTO, import_root, reading_inside
from failatlas.core.stages import stage_run
from failatlas.core.store import Store


class TaskImportParams(BaseModel):
    """What to import: files and folders (walked), in one format or `auto` (detected per item), and importer
    options (each importer takes the ones it declares in its `Options`)."""

    model_config = ConfigDict(extra="forbid")

    paths: list[Path] = Field(min_length=1)
    format: str = AUTO
    options: dict[str, Any] = Field(default_factory=dict)
    papers: Path | None = Field(default=None, description="the per-paper resource file (paper_file.py); default: "
                                "a failatlas-papers.yaml beside the imported paths")


class TaskImportResult(BaseModel):
    """What one import did, file by file, and the id of its `stage_runs` row."""

    files: list[FileReport] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list, description="files met in folders that no importer reads")
    stage_run_id: str | None = None

    def _total(self, attr: str) -> int:
        return sum(len(getattr(f, attr)) for f in self.files)

    @property
    def n_tasks(self) -> int:
        return sum(f.n_tasks for f in self.files)

    @property
    def inserted(self) -> int:
        return self._total("inserted")

    @property
    def updated(self) -> int:
        return self._total("updated")

    @property
    def unchanged(self) -> int:
        return self._total("unchanged")

    @property
    def by_kind(self) -> dict[str, int]:
        return dict(sum((Counter(f.by_kind) for f in self.files), Counter()))

    @property
    def warnings(self) -> dict[str, int]:
        return dict(sum((Counter(f.warnings) for f in self.files), Counter()).most_common())

    @property
    def n_warnings(self) -> int:
        return sum(self.warnings.values())

    def summary(self, named: int = 5) -> str:
        """One line: files, tasks (new / updated / unchanged), by kind, warnings, and the files skipped (the
        first `named` by name, then how many more)."""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind.items())) or "none"
        counts = f"{self.inserted} new, {self.updated} updated, {self.unchanged} unchanged"
        line = (
            f"{len(self.files)} file(s), {self.n_tasks} task(s) ({counts}); by kind: {kinds}; "
            f"{self.n_warnings} warning(s)"
        )
        if self.skipped:
            more = len(self.skipped) - named
            line += f"; {len(self.skipped)} file(s) skipped: " + ", ".join(self.skipped[:named]) + (
                f" and {more} more (--json lists them all)" if more > 0 else "")
        return line


def _check_storable(task: TaskSpec, path: Path) -> None:
    """InputError naming the file when a task cannot be written as JSON (a value nested past what the writer
    follows, say, inside a field the importer parsed from text): it fails here, before anything is written."""
    try:
        task.model_dump_json()
    except (PydanticSerializationError, ValueError, RecursionError) as exc:
        raise InputError(f"task {task.id} cannot be stored: {str(exc).splitlines()[0]}", path=str(path)) from exc


def _roots(params: TaskImportParams) -> list[Path]:
    """What this import may read through links: the imported folders (a named file's folder) and the files its
    options name (an index, a checks file: the user's own choice)."""
    roots = [import_root(p) for p in params.paths]
    for value in params.options.values():
        if isinstance(value, str | Path) and str(value) and Path(value).exists():
            roots.append(Path(value).resolve())
    return roots


def _check_unique(loaded: list[tuple[Found, list[TaskSpec]]]) -> None:
    """InputError naming both sources when two items of one import hold the same task id: the second would
    silently overwrite the first."""
    first: dict[str, str] = {}
    for item, tasks in loaded:
        for task in tasks:
            source = task.source or str(item.path)
            if task.id in first and first[task.id] != source:
                raise InputError(f"task id {task.id!r} is also the id of a task in {first[task.id]}: one would "
                                 "overwrite the other", path=source,
                                 hint="give one of them another id, or import them separately")
            first.setdefault(task.id, source)


def run(store: Store, params: TaskImportParams, *, on_step: Callable[[Found], None] | None = None) -> TaskImportResult:
    """Import the tasks under `params.paths` into the catalog, recording one `stage_runs` row (`tasks.import`).

    Every item is read and validated before anything is written; then all are written, with the stage-run
    record, in one transaction. Re-importing updates tasks in place and never duplicates them. Raises
    InputError (naming file, line, field) for a missing, unrecognised or malformed input and ConfigError for an
    unknown format; in both cases no task is written. Files are read only inside the imported folders (a link
    leading out, a FIFO or a device is an InputError naming it), and two items holding one task id are an
    InputError naming both. `on_step` is called after each item is read.
    """
    TASK_IMPORTERS.check_options(params.options, params.format)
    with reading_inside(_roots(params)):
        discovery = discover(params.paths, params.format)
    if not discovery.found:
        raise InputError(
            "nothing to import: no task file or task folder found",
            path=", ".join(map(str, params.paths)),
            hint="known formats: " + "; ".join(f"{imp.name}: {imp.description}"
                                               for imp in TASK_IMPORTERS.in_sniff_order()),
        )
    options = {k: Path(v).resolve() if isinstance(v, Path) else v for k, v in params.options.items()}
    found_papers = params.papers or paper_file.find_beside(params.paths)
    papers = (paper_file.load(found_papers, explicit=params.papers is not None) if found_papers is not None
              else None)
    recorded = params.model_copy(update={"paths": [p.resolve() for p in params.paths], "options": options,
                                         "papers": papers.path if papers else None})
    with stage_run(store, "tasks.import", recorded) as stage:
        loaded: list[tuple[Found, list[TaskSpec]]] = []
        with reading_inside(_roots(params)):
            for item in discovery.found:
                tasks = TASK_IMPORTERS.load(item.path, item.format, params.options).records
                if papers is not None:
                    tasks = paper_file.apply(tasks, papers)
                for task in tasks:
                    _check_storable(task, item.path)
                loaded.append((item, tasks))
                if on_step:
                    on_step(item)
        _check_unique(loaded)
        result = TaskImportResult(skipped=[str(p) for p in discovery.skipped], stage_run_id=stage.id)
        with store.write() as conn:  # one transaction; each save_tasks joins it
            for item, tasks in loaded:
                saved = save_tasks(store, tasks, source=str(item.path))
                result.files.append(FileReport(format=item.format, **saved.model_dump()))
            stage.count("tasks", result.inserted + result.updated)
            stage.note(files=len(result.files), inserted=result.inserted, updated=result.updated,
                       unchanged=result.unchanged, skipped=len(result.skipped), warnings=result.n_warnings)
            stage.record(conn)
    return result

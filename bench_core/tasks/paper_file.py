"""A per-paper resource file the user keeps beside a benchmark (issue 52): what each paper really needs, over
what its benchmark rows declare (a diffusion paper's rows say 0 GPUs, 4 GB and no network).

    # failatlas-papers.yaml, beside the benchmark's files (or given with `tasks import --papers FILE`)
    "2205.00048":
      gpus: 0
      memory_gb: 8
      timeout_s: 1800                 # the experiment's time limit (resources.time_limit_s, run.timeout_s)
      network: none                   # none | registries | full
      allow_hosts: [files.grouplens.org]
      environment: prebuilt           # agent | prebuilt
      data: {ml1m: standin/ml1m}      # NAME: PATH (relative to this file), mounted at /data/NAME

`tasks import` applies it to every task of each paper it names, so every run, re-run and judge honours it; each
task records where its values came from (`extra.paper_file`: the file, its digest, the keys it set, the data
paths) and warns `resources-from-paper-file`. `tasks validate --paper P` and `bench run --paper P` mount the data
it names unless `--data` gives that name. A malformed file is an error naming the file, line and field, and
nothing is imported. Found beside an imported path: `failatlas-papers.yaml` in the imported folder (or the
file's folder) or the folder above it.

The file is read with the task files' bounded YAML reader (size, nesting, aliases, huge integers, lone surrogates)
and what it applies is validated as the task's own fields are (`allow_hosts: ["*"]` is refused as in a task
file). A file found beside a bundle came with it, so its data paths must stay inside its own folder (relative, no
`..`, no link leading out) and it may not itself be a link out of that folder; a file named with `--papers` is the
user's own, and its data paths may lie anywhere.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from failatlas.bench_core.tasks.importers._common import load_yaml, validation_error
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.importers import check_input
from failatlas.core.paths import inside

FILE_NAME = "failatlas-papers.yaml"
KEY = "paper_file"
WARNING = "resources-from-paper-file"


class PaperResources(BaseModel):
    """One paper's entry."""

    model_config = ConfigDict(extra="forbid")

    gpus: int | None = Field(default=None, ge=0)
    memory_gb: float | None = Field(default=None, gt=0)
    timeout_s: int | None = Field(default=None, ge=1)
    cpus: float | None = Field(default=None, gt=0)
    network: Literal["none", "registries", "full"] | None = None
    allow_hosts: list[str] | None = None
    environment: Literal["agent", "prebuilt"] | None = None
    data: dict[str, str] = Field(default_factory=dict)

    @field_validator("data")
    @classmethod
    def _names(cls, data: dict[str, str]) -> dict[str, str]:
        for name in data:
            if not name.isidentifier():
                raise ValueError(f"data name {name!r} is not an identifier (letters, digits, _)")
        return data


class PaperFile(BaseModel):
    """The file read: where it is, its digest, and each paper's entry (data paths made absolute)."""

    path: Path
    digest: str
    papers: dict[str, PaperResources]


def _line_of(text: str, key: str) -> int | None:
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().strip("'\"").startswith(key.strip("'\"")):
            return n
    return None


def load(path: Path, *, explicit: bool = True) -> PaperFile:
    """Read and check `path`. InputError naming the file, line and field when it is not a mapping of paper id to
    resources, breaks a bound of the YAML reader, or a data path does not exist; and, unless `explicit` (the
    user named the file), when the file is a link out of its folder or a data path is absolute, holds `..` or
    leads out of the file's folder through a link."""
    given = Path(path)
    if not explicit:
        check_input(given, (given.absolute().parent,))
    path = given.resolve()
    data = load_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError("not a mapping of paper id to resources", path=str(path))
    raw = path.read_bytes()
    text = raw.decode("utf-8", errors="replace")
    papers: dict[str, PaperResources] = {}
    for paper, entry in data.items():
        try:
            got = PaperResources.model_validate(entry or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(str(first["msg"]).removeprefix("Value error, "), path=str(path),
                             line=_line_of(text, str(paper)),
                             field=f"{paper}.{where}" if where else str(paper)) from None
        for name, rel in got.data.items():
            got.data[name] = str(_data_path(path, rel, explicit=explicit, line=_line_of(text, name),
                                            field=f"{paper}.data.{name}"))
        papers[str(paper)] = got
    return PaperFile(path=path, digest=hashlib.sha256(raw).hexdigest()[:16], papers=papers)


def _data_path(path: Path, rel: str, *, explicit: bool, line: int | None, field: str) -> Path:
    """The data path `rel` of the papers file `path`, resolved and checked to exist (and, unless `explicit`, to
    stay inside the file's folder)."""
    if "\x00" in rel or not rel.strip():
        raise InputError(f"must be a path, not {rel!r}", path=str(path), line=line, field=field)
    if explicit:
        full = (path.parent / rel).resolve()
    else:
        try:
            full = inside(path.parent, rel, within="the papers file's folder", path=str(path), line=line,
                          field=field)
        except InputError as exc:
            exc.hint = (f"this file was found beside the imported files, so it may mount only what lies in its "
                        f"own folder; to mount data from elsewhere, name the file yourself: tasks import "
                        f"--papers {path} ...")
            raise
    if not full.exists():
        raise InputError(f"data {field.rsplit('.', 1)[-1]}: {full} does not exist", path=str(path), line=line,
                         field=field)
    return full


def find_beside(paths: list[Path]) -> Path | None:
    """The `failatlas-papers.yaml` beside the imported paths: in each (or its folder), then the folder above."""
    for given in paths:
        here = Path(given).resolve()
        folder = here if here.is_dir() else here.parent
        for candidate in (folder / FILE_NAME, folder.parent / FILE_NAME):
            if candidate.is_file() or candidate.is_symlink():
                return candidate
    return None


def apply(tasks: list[TaskSpec], papers: PaperFile) -> list[TaskSpec]:
    """`tasks` with their paper's entry over their declared resources (tasks of other papers unchanged)."""
    out = []
    for task in tasks:
        entry = papers.papers.get(task.paper.id or "")
        if entry is None:
            out.append(task)
            continue
        given = entry.model_dump(exclude_none=True, exclude={"data"})
        resources = {("time_limit_s" if k == "timeout_s" else k): v for k, v in given.items()}
        update: dict = {"resources": task.resources.model_copy(update=resources)}
        if entry.timeout_s is not None:
            update["run"] = task.run.model_copy(update={"timeout_s": entry.timeout_s})
        if entry.data:
            update["data"] = {**task.data, **{name: None for name in entry.data}}
        update["extra"] = {**task.extra, KEY: {"file": str(papers.path), "digest": papers.digest,
                                               "set": sorted(given), "data": dict(entry.data)}}
        note = f"{WARNING}: {', '.join(sorted([*given, *(['data'] if entry.data else [])]))} from {papers.path}"
        update["warnings"] = [*[w for w in task.warnings if not w.startswith(WARNING)], note]
        out.append(_validated(task.model_copy(update=update), papers, task.paper.id or ""))
    return out


def _validated(task: TaskSpec, papers: PaperFile, paper: str) -> TaskSpec:
    """`task` validated again as a whole, now that the paper file's values are in it: a value the task model
    refuses (a host `*`, a time limit out of range) is an InputError naming the paper file and field."""
    try:
        return TaskSpec.model_validate(task.model_dump())
    except ValidationError as exc:
        field = validation_error(exc, path=papers.path, prefix=paper).field
        message = str(exc.errors()[0].get("msg", exc)).removeprefix("Value error, ")
        raise InputError(f"{message} (applied to task {task.id})", path=str(papers.path), field=field) from exc


def data_of(tasks: list[TaskSpec]) -> dict[str, Path]:
    """The data paths the paper file named for `tasks` (NAME -> PATH), as recorded at import."""
    out: dict[str, Path] = {}
    for task in tasks:
        for name, path in ((task.extra.get(KEY) or {}).get("data") or {}).items():
            out.setdefault(name, Path(path))
    return out

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
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError

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


def load(path: Path) -> PaperFile:
    """Read and check `path`. InputError naming the file, line and field when it is not a mapping of paper id to
    resources, or a data path does not exist."""
    import yaml

    path = Path(path).resolve()
    try:
        raw = path.read_bytes()
        data = yaml.safe_load(raw.decode("utf-8")) or {}
    except OSError as exc:
        raise InputError(f"cannot read the paper file: {exc.strerror}", path=str(path)) from exc
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"not valid YAML: {exc}", path=str(path)) from exc
    text = raw.decode("utf-8")
    if not isinstance(data, dict):
        raise InputError("not a mapping of paper id to resources", path=str(path))
    papers: dict[str, PaperResources] = {}
    for paper, entry in data.items():
        try:
            got = PaperResources.model_validate(entry or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(first["msg"], path=str(path), line=_line_of(text, str(paper)),
                             field=f"{paper}.{where}" if where else str(paper)) from None
        for name, rel in got.data.items():
            full = (path.parent / rel).resolve()
            if not full.exists():
                raise InputError(f"data {name}: {full} does not exist", path=str(path), line=_line_of(text, name),
                                 field=f"{paper}.data.{name}")
            got.data[name] = str(full)
        papers[str(paper)] = got
    return PaperFile(path=path, digest=hashlib.sha256(raw).hexdigest()[:16], papers=papers)


def find_beside(paths: list[Path]) -> Path | None:
    """The `failatlas-papers.yaml` beside the imported paths: in each (or its folder), then the folder above."""
    for given in paths:
        here = Path(given).resolve()
        folder = here if here.is_dir() else here.parent
        for candidate in (folder / FILE_NAME, folder.parent / FILE_NAME):
            if candidate.is_file():
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
        out.append(task.model_copy(update=update))
    return out


def data_of(tasks: list[TaskSpec]) -> dict[str, Path]:
    """The data paths the paper file named for `tasks` (NAME -> PATH), as recorded at import."""
    out: dict[str, Path] = {}
    for task in tasks:
        for name, path in ((task.extra.get(KEY) or {}).get("data") or {}).items():
            out.setdefault(name, Path(path))
    return out

"""Data and weights given to a run: `--data NAME=PATH` (the user's, for every selected task) over a task file's
`data:` mapping (paths inside the task's folder, or null: the user must give it). Each is mounted read-only at
`/data/NAME` in the run's sandbox and in every re-run scoring makes (`SandboxSpec.data`), never copied into a
workspace, and recorded with the run (path, bytes, files, newest mtime) so that a re-score mounts the same or
says why it cannot.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from failatlas.bench_core.tasks.data import check_name, data_target
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import ConfigError, InputError

FINGERPRINT_ENTRIES = 100_000
# a task variant whose expected values were taken on given data (task_validation/standin.py) keeps each input's
# fingerprint under this key of its `extra`
VALUED_ON_KEY = "expected_from_reference"


class DataInput(BaseModel):
    """One data input as a run used it: its name, the resolved host path, and a cheap fingerprint of what was
    there (bytes and files in all, the newest modification time; `complete` is false when the walk stopped at
    `FINGERPRINT_ENTRIES` entries, and then describes only those)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    path: str
    bytes: int
    files: int
    mtime_ns: int
    complete: bool = True

    @property
    def target(self) -> str:
        return data_target(self.name)

    @classmethod
    def of(cls, name: str, path: Path) -> DataInput:
        """The data input `name` at `path` (resolved) as it is now. InputError when nothing is there."""
        path = Path(path).resolve()
        try:
            top = path.stat()
        except OSError as exc:
            raise InputError(f"data input {name}: {path} cannot be read: {exc.strerror or exc}") from None
        if not path.is_dir():
            return cls(name=name, path=str(path), bytes=top.st_size, files=1, mtime_ns=top.st_mtime_ns)
        total = files = entries = 0
        newest = top.st_mtime_ns
        for here, dirs, names in os.walk(path):
            for item, is_file in [*((d, False) for d in dirs), *((f, True) for f in names)]:
                entries += 1
                if entries > FINGERPRINT_ENTRIES:
                    return cls(name=name, path=str(path), bytes=total, files=files, mtime_ns=newest, complete=False)
                try:
                    st = os.lstat(os.path.join(here, item))
                except OSError:
                    continue
                newest = max(newest, st.st_mtime_ns)
                if is_file:
                    files += 1
                    total += st.st_size
        return cls(name=name, path=str(path), bytes=total, files=files, mtime_ns=newest)

    def changed(self) -> str | None:
        """Why what is at `path` now is not what the run used (None: the same, as far as the fingerprint sees)."""
        try:
            now = DataInput.of(self.name, Path(self.path))
        except InputError as exc:
            return str(exc)
        if now != self:
            return (f"data input {self.name} at {self.path} changed since the run ({self.files} file(s), "
                    f"{self.bytes} bytes then; {now.files}, {now.bytes} now, or newer files)")
        return None


def parse_data_options(values: Iterable[str], *, field: str = "--data") -> dict[str, Path]:
    """`NAME=PATH` strings as name -> resolved path. ConfigError naming `field` for a value without `=`, a name
    that is not an identifier, a name given twice, or a path that does not exist."""
    out: dict[str, Path] = {}
    for value in values:
        name, sep, raw = value.partition("=")
        if not sep or not raw:
            raise ConfigError(f"{field} {value!r} is not NAME=PATH", hint="e.g. --data movielens=/srv/ml-1m")
        check_name(name, field=field)
        if name in out:
            raise ConfigError(f"{field}: the data name {name!r} is given twice")
        path = Path(raw).expanduser()
        if not path.exists():
            raise ConfigError(f"{field} {name}={raw}: {raw} does not exist")
        out[name] = path.resolve()
    return out


def check_outside(data: Mapping[str, Path], guarded: Mapping[str, Path], *, field: str = "--data") -> None:
    """ConfigError naming `field` when a data path lies inside, or holds, one of the `guarded` folders (label ->
    path: the store, its runs' workspaces, the repository cache): the sandbox would see the store or ground truth,
    or a run's own workspace."""
    for name, path in data.items():
        path = Path(path).resolve()
        for label, other in guarded.items():
            other = Path(other).resolve()
            if path.is_relative_to(other) or other.is_relative_to(path):
                where = "lie inside" if path.is_relative_to(other) and path != other else "hold"
                raise ConfigError(f"{field} {name}={path}: a data input may not {where} {label} ({other})",
                                  hint="give a folder that holds only the data (datasets, weights)")


def task_data(task: TaskSpec, given: Mapping[str, Path]) -> tuple[dict[str, Path], str | None]:
    """The data inputs of `task`'s runs (name -> host path): the user's `given` ones, over those the task file
    declares (a path inside the task's folder); and the one-line reason the task cannot run when a declared input
    is neither given nor there (None when all are)."""
    from failatlas.bench_core.prepare.leaks import task_path

    out: dict[str, Path] = {}
    for name, rel in task.data.items():
        if name in given:
            continue
        if rel is None:
            return {}, f"data input {name} is not given; pass --data {name}=PATH"
        try:
            path = task_path(task, rel, field=f"data.{name}")
        except InputError as exc:
            return {}, f"data input {name}: {exc.one_line()}"
        if not path.exists():
            return {}, f"data input {name} is missing ({path}); pass --data {name}=PATH"
        out[name] = path.resolve()
    out.update(given)
    if task.source:
        source = Path(task.source).resolve()
        for name, path in out.items():
            if source.is_relative_to(path):
                return {}, f"data input {name} ({path}) holds the task file {source} (ground truth)"
    return out, None


def fingerprints(data: Mapping[str, Path], cache: dict[Path, DataInput] | None = None) -> dict[str, DataInput]:
    """Each data input as it is now (name -> DataInput), walked once per path within `cache`."""
    out = {}
    for name, path in data.items():
        found = cache.get(path) if cache is not None else None
        found = found or DataInput.of(name, path)
        if cache is not None:
            cache[path] = found
        out[name] = found.model_copy(update={"name": name})
    return out


def valued_on_problem(task: TaskSpec, data: Mapping[str, DataInput]) -> str | None:
    """Why `task`, a variant whose expected values were taken on certain data, cannot run on `data` (None: it can,
    or it is no such variant): the same names with the same fingerprints (everything but the path)."""
    made = task.extra.get(VALUED_ON_KEY)
    if not isinstance(made, dict):
        return None
    valued_on = made.get("data") or {}
    if not isinstance(valued_on, dict) or not all(isinstance(w, dict) for w in valued_on.values()):
        # a task file's own `extra` (the harness writes a dict of fingerprints): refused, never a crash of the batch
        return f"its record of the data its expected values were taken on ({VALUED_ON_KEY}.data) is unreadable"
    for name, wanted in valued_on.items():
        given = data.get(name)
        if given is None or given.model_dump(exclude={"path"}) != wanted:
            return (f"its expected values were taken on other data for {name} ({wanted.get('files')} file(s), "
                    f"{wanted.get('bytes')} bytes); give that data with --data {name}=PATH, or value "
                    f"{made.get('of')} again (`tasks validate --expected-from-reference`)")
    return None

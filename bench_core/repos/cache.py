"""The repository cache: folders under one cache folder, each a repository's tree at its pinned commit, and
the `repositories` rows that say which is which. This module reads the rows and places folders; the rows are
written by `writes.py`.

A folder is named `<slug of the URL>-<12 characters of the commit>` and appears all at once: its tree is made
in a staging folder inside the cache folder, then renamed into place, so a failure leaves nothing half-made.
"""

from __future__ import annotations

import datetime as dt
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import duckdb
from pydantic import BaseModel, Field

from failatlas.bench_core.repos.urls import normalise_url, slug
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import FailAtlasError
from failatlas.core.store import Store

CACHE_FOLDER = "repos"
STAGING_PREFIX = ".staging-"
SourceKind = Literal["git", "checkout", "folder", "tarball"]
CommitFrom = Literal["head", "tar-header", "given", "tree-sha256"]
_COLUMNS = "id, url, commit, commit_from, path, source, source_kind, task_ids, added_at, stage_run_id"


class CachedRepo(BaseModel):
    """A repository checked out in the cache: its normal URL (None for one bound to tasks only), the commit it
    is pinned at (`tree-sha256:...` when no commit names it), its folder, and where it came from."""

    url: str | None
    commit: str
    path: Path
    source: str


class CacheEntry(CachedRepo):
    """A `repositories` row: a cached repository with how its pin was read and the tasks bound to it."""

    id: str
    commit_from: CommitFrom
    source_kind: SourceKind
    task_ids: list[str] = Field(default_factory=list)
    added_at: dt.datetime | None = None
    stage_run_id: str | None = None

    def cached(self) -> CachedRepo:
        return CachedRepo(url=self.url, commit=self.commit, path=self.path, source=self.source)


def entry_id(url: str | None, folder: str) -> str:
    """A row's key: the normal URL, or `local:<folder name>` for a repository bound to tasks only."""
    return url if url else f"local:{folder}"


def folder_name(url: str | None, commit: str, fallback: str) -> str:
    """`<slug>-<commit, 12 characters>`; a content hash gives `<slug>-tree-<12 hex>`."""
    short = commit.removeprefix("tree-sha256:")[:12]
    return f"{slug(url, fallback)}-{'tree-' if commit.startswith('tree-sha256:') else ''}{short}"


def default_cache_dir(store: Store) -> Path:
    """`<the store's folder>/repos`."""
    return Path(store.path).resolve().parent / CACHE_FOLDER


def _entries(store: Store, where: str = "", params: list | None = None) -> list[CacheEntry]:
    try:
        with store.read() as conn:
            cur = conn.execute(f"SELECT {_COLUMNS} FROM repositories {where} ORDER BY id", params or [])
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    except duckdb.CatalogException:  # a store from before this table: nothing is cached
        return []
    return [CacheEntry(**row) for row in rows]


def list_repositories(store: Store) -> list[CacheEntry]:
    """Every cached repository, by id."""
    return _entries(store)


def get_entry(store: Store, row_id: str) -> CacheEntry | None:
    """The row with this id (a normal URL, or `local:<folder>`), or None."""
    found = _entries(store, "WHERE id = ?", [row_id])
    return found[0] if found else None


def _commit_fits(cached: str, wanted: str | None) -> bool:
    """Whether a pin satisfies a task's commit (either may be abbreviated); any pin does when it names none."""
    if not wanted:
        return True
    wanted, cached = wanted.lower(), cached.lower()
    return len(min(wanted, cached, key=len)) >= 7 and (cached.startswith(wanted) or wanted.startswith(cached))


def repository_for(store: Store, task: TaskSpec) -> CachedRepo | None:
    """The cached checkout for the task: by its repository.url (normalised), else a binding to its id; None
    when the cache holds none. A task with a bundled copy (`repository.local_path`) gets only a checkout bound to
    its id (`repos add PATH --task ID`), which then replaces the bundled copy.

    A task that names a commit gets only a checkout pinned at that commit. A row whose folder is gone (deleted
    by hand) counts as none. Reads the store once, read-only."""
    repo = task.repository
    for origin in made_from(task):  # a variant of a task runs on that task's repository
        if origin != task.id and _variant_of(store, task, origin):
            found = repository_for(store, task.model_copy(update={"id": origin, "extra": {}}))
            if found is not None and not any(task.id in row.task_ids for row in _entries(
                    store, "WHERE list_contains(task_ids, ?)", [task.id])):
                return found
    if repo.local_path:
        bound = _entries(store, "WHERE list_contains(task_ids, ?)", [task.id])
        return next((row.cached() for row in bound if row.path.is_dir()), None)
    try:
        url = normalise_url(repo.url) if repo.url else None
    except FailAtlasError:
        url = None
    rows = _entries(store, "WHERE id = ? OR list_contains(task_ids, ?)", [url or "", task.id])
    by_url = [r for r in rows if url and r.url == url and _commit_fits(r.commit, repo.commit)]
    bound = [r for r in rows if task.id in r.task_ids]
    for row in (*by_url, *bound):
        if row.path.is_dir():
            return row.cached()
    return None


# the keys of a task's `extra` under which a variant that runs on its origin's repository names that task (`of`): a
# task valued on given data (task_validation/standin.py). An impossible twin is not one: its folder holds its own
# copy, with the visible check (tasks/twins.py)
VARIANT_KEYS = ("expected_from_reference",)


def made_from(task: TaskSpec) -> list[str]:
    """The ids of the tasks `task` is a variant of (none for a task of its own): the `of` a variant names, when its
    own id is that task's id and the variant's suffix (`<of>+ref-...`), so a task file cannot borrow another
    task's repository by naming it."""
    return [made["of"] for key in VARIANT_KEYS if isinstance(made := task.extra.get(key), dict)
            and isinstance(made.get("of"), str) and task.id.startswith(made["of"] + "+ref-")]


_VARIED = {"id", "expected_results", "data", "extra", "warnings"}  # what `standin.variant` changes


def _variant_of(store: Store, task: TaskSpec, origin_id: str) -> bool:
    """Whether `task` is the stored task `origin_id` in all but what a variant changes (its id, expected values,
    data inputs, its record under VARIANT_KEYS, warnings): a task file that takes a variant's id and names a task as
    its origin, to run its own command, masking or hidden tests on that task's repository, is not."""
    from failatlas.bench_core.tasks.catalog import get_task

    try:
        origin = get_task(store, origin_id)
        task = get_task(store, task.id)  # as stored: a run's copy carries its overrides (--gpus, --environment)
    except FailAtlasError:
        return False
    if task.model_dump(exclude=_VARIED) != origin.model_dump(exclude=_VARIED):
        return False
    if [m.model_dump(exclude={"value"}) for m in task.expected_results] != \
            [m.model_dump(exclude={"value"}) for m in origin.expected_results]:
        return False
    if {k: v for k, v in task.extra.items() if k not in VARIANT_KEYS} != origin.extra:
        return False
    given = {name for key in VARIANT_KEYS if isinstance(made := task.extra.get(key), dict)
             and isinstance(made.get("data"), dict) for name in made["data"]}
    return task.data == {**origin.data, **dict.fromkeys(given)}


def fits(entry: CacheEntry | None, commit: str | None) -> bool:
    """Whether `entry` is a usable pin for a task naming `commit` (None: any)."""
    return entry is not None and entry.path.is_dir() and _commit_fits(entry.commit, commit)


@contextmanager
def staging(cache_dir: Path) -> Iterator[Path]:
    """A fresh folder inside `cache_dir` to build a tree in; removed when the block ends, whatever happens."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    folder = cache_dir / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def place(tree: Path, cache_dir: Path, name: str, *, in_use: set[Path]) -> Path:
    """Move `tree` (a staging folder's) to `cache_dir/name` in one rename; returns the final path. A folder
    already there is kept when a row uses it (`in_use`: same URL and commit, so the same tree) and replaced when
    none does (a leftover)."""
    final = cache_dir / name
    if final.exists():
        if final.resolve() in in_use:
            return final
        leftover = tree.parent / "leftover"
        final.rename(leftover)
    tree.rename(final)
    return final


def remove_folder(cache_dir: Path, path: Path) -> bool:
    """Delete a cached folder no row uses any more; never anything outside `cache_dir`."""
    base, target = cache_dir.resolve(), Path(path)
    if target.is_symlink() or not target.is_dir() or target.resolve().parent != base:
        return False
    shutil.rmtree(target)
    return True

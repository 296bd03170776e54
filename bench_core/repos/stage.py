"""The `repos.add` and `repos.fetch` stages: get repositories into the cache, pinned, and record them.

`add(store, AddParams)` caches one source the user names (a git URL or bare repository, a checkout, a folder, a
tarball); `fetch(store, FetchParams)` clones every repository that imported tasks name and the cache lacks, one
after another, going on after a failure. One URL has one pin: re-adding it at the same commit changes nothing
(tasks named with `--task` are bound all the same); at another commit it replaces the pin and the old folder is
removed. Each call is one `stage_runs` row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from failatlas.bench_core.repos import git
from failatlas.bench_core.repos.cache import (
    CacheEntry,
    default_cache_dir,
    entry_id,
    fits,
    folder_name,
    get_entry,
    list_repositories,
    place,
    remove_folder,
    staging,
)
from failatlas.bench_core.repos.sources import (
    Obtained,
    Source,
    check_commit,
    classify,
    default_url,
    known_pin,
    obtain,
    tarball_url,
)
from failatlas.bench_core.repos.task_urls import Wanted, task_repos, urls_of_tasks, wanted_repositories
from failatlas.bench_core.repos.urls import clone_url, normalise_url, without_credentials
from failatlas.bench_core.repos.writes import save_entry
from failatlas.core.errors import FailAtlasError, InputError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store


class AddParams(BaseModel):
    """One repository to cache: `source` (git URL or bare repository, checkout, folder, tarball), the `url` it
    stands for (default: see `add`), tasks to bind it to (`task_ids`: those naming no URL), `commit` to check
    out (git) or naming the tree (folder, tarball), the cache folder (default `<store's folder>/repos`)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    url: str | None = None
    task_ids: list[str] = Field(default_factory=list)
    commit: str | None = None
    cache_dir: Path | None = None
    timeout_s: float = Field(default=git.CLONE_TIMEOUT_S, gt=0)


class AddResult(BaseModel):
    """What `add` did: `added`, `replaced` (the URL was pinned at `replaced_commit`) or `unchanged`."""

    entry: CacheEntry
    action: Literal["added", "replaced", "unchanged"]
    replaced_commit: str | None = None
    notes: list[str] = Field(default_factory=list)
    stage_run_id: str | None = None

    def summary(self) -> str:
        """One line: what happened, to which URL (or tasks), at which commit, where."""
        what = self.entry.url or "the repository of " + ", ".join(self.entry.task_ids)
        line = f"{self.action} {what} at {self.entry.commit} ({self.entry.source_kind}) in {self.entry.path}"
        if self.replaced_commit:
            line += f"; the previous pin {self.replaced_commit} was replaced and its folder removed"
        return line


class FetchParams(BaseModel):
    """Which tasks' repositories to fetch (`task_ids`, `benchmark`; all imported tasks by default), the cache
    folder, whether a task may name a repository on this machine (`allow_local`), git's time limit per clone."""

    model_config = ConfigDict(extra="forbid")

    task_ids: list[str] = Field(default_factory=list)
    benchmark: str | None = None
    cache_dir: Path | None = None
    allow_local: bool = False
    timeout_s: float = Field(default=git.CLONE_TIMEOUT_S, gt=0)


class FetchOutcome(BaseModel):
    """One repository of a fetch: `ok` (cloned now), `cached` (already there) or `failed` (with git's reason)."""

    url: str
    status: Literal["ok", "cached", "failed"]
    commit: str | None = None
    path: Path | None = None
    reason: str | None = None
    task_ids: list[str] = Field(default_factory=list)

    def line(self) -> str:
        tasks = f"{len(self.task_ids)} task(s)"
        if self.status == "failed":
            return f"failed  {self.url} ({tasks}): {self.reason}"
        return f"{self.status:<7} {self.url} at {self.commit} ({tasks}) in {self.path}"


class FetchResult(BaseModel):
    """Every repository of a fetch, and the tasks that name none (`repos add --task` binds one to them)."""

    outcomes: list[FetchOutcome] = Field(default_factory=list)
    without_repository: list[str] = Field(default_factory=list)
    stage_run_id: str | None = None

    @property
    def failed(self) -> list[FetchOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def summary(self) -> str:
        counts = {s: sum(o.status == s for o in self.outcomes) for s in ("ok", "cached", "failed")}
        line = (f"{len(self.outcomes)} repositor{'y' if len(self.outcomes) == 1 else 'ies'}: {counts['ok']} "
                f"fetched, {counts['cached']} already cached, {counts['failed']} failed")
        if self.without_repository:
            line += f"; {len(self.without_repository)} task(s) name no repository (bind one: repos add --task)"
        return line


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _resolve_url(store: Store, source: Source, given: str | None, notes: list[str]) -> str | None:
    """The normal URL the source stands for (see `add`); `notes` says how a tarball's was found."""
    if given is not None:
        return normalise_url(given)
    if source.kind == "tarball":
        guess = tarball_url(source)
        if guess is None:
            return None
        tasks = urls_of_tasks(store).get(normalise_url(guess), [])
        if not tasks:
            notes.append(f"the tarball's name suggests {guess}, but no imported task names it: pass --url to use it")
            return None
        notes.append(f"URL {guess} from the tarball's name: {len(tasks)} imported task(s) name it")
        return normalise_url(guess)
    url = default_url(source)
    return normalise_url(url) if url else None


def _keep(store: Store, got: Obtained, url: str | None, source: Source, cache_dir: Path, task_ids: list[str],
          stage_id: str) -> CacheEntry:
    """Move an obtained tree into the cache and describe it as a row."""
    name = folder_name(url, got.commit, source.name)
    path = place(got.tree, cache_dir, name, in_use={e.path.resolve() for e in list_repositories(store)})
    return CacheEntry(id=entry_id(url, name), url=url, commit=got.commit, commit_from=got.commit_from,
                      path=path.resolve(), source=without_credentials(source.location), source_kind=source.kind,
                      task_ids=task_ids, added_at=_now(), stage_run_id=stage_id)


def _current(store: Store, url: str | None, source: Source, pin: str | None) -> CacheEntry | None:
    """The row this source would replace: the URL's, or (without a URL) the one of the same folder."""
    if url is not None:
        return get_entry(store, url)
    return get_entry(store, entry_id(None, folder_name(None, pin, source.name))) if pin else None


def _cache(store: Store, source: Source, url: str | None, commit: str | None, cache_dir: Path,
           params: AddParams, notes: list[str], stage_id: str) -> AddResult:
    """The work of `add` up to (not including) the write: the tree in place, or the existing pin."""
    pin = known_pin(source, commit)
    current = _current(store, url, source, pin)
    bound = list(dict.fromkeys([*(current.task_ids if current else []), *params.task_ids]))
    if current is not None and pin is not None and current.commit == pin and current.path.is_dir():
        return AddResult(entry=current.model_copy(update={"task_ids": bound}), action="unchanged", notes=notes)
    with staging(cache_dir) as folder:
        got = obtain(source, folder, commit, timeout=params.timeout_s)
        notes += got.notes
        current = current or _current(store, url, source, got.commit)
        bound = list(dict.fromkeys([*(current.task_ids if current else []), *params.task_ids]))
        if current is not None and current.commit == got.commit and current.path.is_dir():
            return AddResult(entry=current.model_copy(update={"task_ids": bound}), action="unchanged", notes=notes)
        entry = _keep(store, got, url, source, cache_dir, bound, stage_id)
    replaced = current.commit if current is not None and current.commit != entry.commit else None
    return AddResult(entry=entry, action="replaced" if replaced else "added", replaced_commit=replaced, notes=notes)


def add(store: Store, params: AddParams) -> AddResult:
    """Cache one repository, pinned, and record it (`repos.add`, one `stage_runs` row).

    The URL it stands for: `params.url`, else the clone URL of a git source, the `origin` remote of a checkout,
    and for a tarball named `<owner>__<name>.tar.gz` `github.com/<owner>/<name>` when an imported task names
    that URL. Without a URL, `task_ids` must name the tasks it serves. Raises InputError for a bad source, URL,
    commit or tarball (nothing is left in the cache), NotFoundError for a task id the catalog lacks, GitFailed
    when git fails."""
    source = classify(params.source)
    commit = check_commit(source, params.commit)
    notes: list[str] = []
    if params.task_ids:  # NotFoundError for an id the catalog lacks
        bundled = [t.task_id for t in task_repos(store, params.task_ids) if t.repository.local_path]
        if bundled:
            notes.append(f"{', '.join(bundled)}: this checkout replaces the bundled copy in their runs")
    url = _resolve_url(store, source, params.url, notes)
    if url is None and not params.task_ids:
        raise InputError("no URL is known for this repository", path=params.source,
                         hint="pass --url URL, or --task ID for the tasks it serves (tasks naming no repository)")
    cache_dir = (params.cache_dir or default_cache_dir(store)).resolve()
    recorded = params.model_copy(update={"source": without_credentials(source.location), "url": url,
                                         "cache_dir": cache_dir})
    with stage_run(store, "repos.add", recorded) as stage:
        result = _cache(store, source, url, commit, cache_dir, params, notes, stage.id)
        result.stage_run_id = stage.id
        try:
            with store.write() as conn:
                released = save_entry(conn, result.entry)
                stage.count("repositories", 0 if result.action == "unchanged" else 1)
                stage.note(action=result.action, url=url, commit=result.entry.commit,
                           path=str(result.entry.path), replaced_commit=result.replaced_commit, notes=result.notes)
                stage.record(conn)
        except BaseException:
            if result.action != "unchanged":  # no row names the new folder: take it back
                remove_folder(cache_dir, result.entry.path)
            raise
    for path in released:
        remove_folder(cache_dir, path)
    return result


def _fetch_one(store: Store, key: str, want: Wanted, params: FetchParams, cache_dir: Path,
               stage_id: str) -> FetchOutcome:
    """Clone one repository tasks name, unless the cache has it; a failure is an outcome, not an exception."""
    outcome = FetchOutcome(url=key, status="failed", task_ids=want.task_ids)
    try:
        url = normalise_url(want.url)
        if len(want.commits) > 1:
            raise InputError(f"its tasks name different commits: {', '.join(sorted(want.commits))}")
        commit = next(iter(want.commits), None)
        current = get_entry(store, url)
        if fits(current, commit):
            return outcome.model_copy(update={"status": "cached", "commit": current.commit, "path": current.path})
        source = Source("git", clone_url(want.url, allow_local=params.allow_local))
        with staging(cache_dir) as folder:
            got = obtain(source, folder, check_commit(source, commit), timeout=params.timeout_s)
            entry = _keep(store, got, url, source, cache_dir, [], stage_id)
        try:
            with store.write() as conn:
                released = save_entry(conn, entry)
        except BaseException:
            remove_folder(cache_dir, entry.path)
            raise
        for path in released:
            remove_folder(cache_dir, path)
        return outcome.model_copy(update={"status": "ok", "commit": entry.commit, "path": entry.path})
    except (FailAtlasError, OSError) as exc:
        return outcome.model_copy(update={"reason": getattr(exc, "reason", None) or str(exc)})


def fetch(store: Store, params: FetchParams,
          on_result: Callable[[FetchOutcome], None] | None = None) -> FetchResult:
    """Clone every repository that the selected imported tasks name and the cache lacks (or holds at another
    commit than the tasks name), recording each as it is pinned; a failure is reported (git's reason) and the
    next repository is tried. One `stage_runs` row (`repos.fetch`). `on_result` is called after each
    repository. NotFoundError for a task id the catalog lacks."""
    tasks = task_repos(store, params.task_ids, params.benchmark)
    wanted, without = wanted_repositories(tasks)
    cache_dir = (params.cache_dir or default_cache_dir(store)).resolve()
    bound = {t for e in list_repositories(store) for t in e.task_ids if e.path.is_dir()}
    result = FetchResult(without_repository=[t for t in without if t not in bound])
    with stage_run(store, "repos.fetch", params.model_copy(update={"cache_dir": cache_dir})) as stage:
        result.stage_run_id = stage.id
        for key, want in wanted.items():
            outcome = _fetch_one(store, key, want, params, cache_dir, stage.id)
            result.outcomes.append(outcome)
            if on_result:
                on_result(outcome)
        stage.count("repositories", sum(o.status == "ok" for o in result.outcomes))
        stage.note(repositories=len(result.outcomes), failed=[o.url for o in result.failed],
                   without_repository=len(result.without_repository))
    return result

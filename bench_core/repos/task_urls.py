"""Which repositories imported tasks name: read from the task catalog (`tasks.spec`'s `repository`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from failatlas.bench_core.repos.urls import normalise_url
from failatlas.bench_core.tasks.model import RepoRef
from failatlas.core.errors import FailAtlasError, NotFoundError
from failatlas.core.store import Store


@dataclass
class TaskRepo:
    """One task's repository as its spec names it."""

    task_id: str
    benchmark: str
    repository: RepoRef


@dataclass
class Wanted:
    """One repository tasks name: the URL as the first task gave it, the commits they name, the tasks."""

    url: str
    commits: set[str] = field(default_factory=set)
    task_ids: list[str] = field(default_factory=list)


def task_repos(store: Store, task_ids: list[str] | None = None, benchmark: str | None = None) -> list[TaskRepo]:
    """The repository of every catalog task (of `task_ids`, of `benchmark`; all when neither is given).
    NotFoundError naming the ids the catalog lacks."""
    clauses, params = [], []
    if task_ids:
        clauses.append("id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(task_ids))
    if benchmark:
        clauses.append("lower(benchmark) = lower(?)")
        params.append(benchmark)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = store.query(f"SELECT id, benchmark, CAST(spec->'$.repository' AS VARCHAR) FROM tasks {where} ORDER BY id",
                       params)
    missing = sorted(set(task_ids or []) - {r[0] for r in rows})
    if missing:
        raise NotFoundError(f"no task(s) {', '.join(missing[:10])} in the catalog",
                            hint="import them first (`failatlas tasks import`); `failatlas tasks list` lists them")
    found = []
    for task_id, bench, repository in rows:
        try:
            repo = RepoRef.model_validate_json(repository) if repository else RepoRef()
        except ValidationError:
            repo = RepoRef()
        found.append(TaskRepo(task_id, bench, repo))
    return found


def wanted_repositories(tasks: list[TaskRepo]) -> tuple[dict[str, Wanted], list[str]]:
    """The repositories `tasks` name, by normal URL (a URL that is none keeps its own text as the key), and the
    ids of the tasks that name none (bundled ones, with `local_path`, are neither)."""
    wanted: dict[str, Wanted] = {}
    without: list[str] = []
    for task in tasks:
        repo = task.repository
        if repo.local_path:
            continue
        if not repo.url:
            without.append(task.task_id)
            continue
        try:
            key = normalise_url(repo.url)
        except FailAtlasError:
            key = repo.url
        entry = wanted.setdefault(key, Wanted(url=repo.url))
        entry.task_ids.append(task.task_id)
        if repo.commit:
            entry.commits.add(repo.commit)
    return wanted, without


def urls_of_tasks(store: Store) -> dict[str, list[str]]:
    """Normal URL -> ids of the catalog tasks naming it."""
    wanted, _ = wanted_repositories(task_repos(store))
    return {url: w.task_ids for url, w in wanted.items()}

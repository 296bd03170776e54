"""The repository cache: task repositories fetched once (`git clone`, a checkout, a folder, a tarball), each
pinned at a commit recorded in the store (`repositories`), and found again for any task of that repository.

Stages: `add(store, AddParams)` (`repos.add`) and `fetch(store, FetchParams)` (`repos.fetch`). Readers call
`repository_for(store, task)`; URLs compare by `normalise_url`. Documented in docs/store/repos.md.
"""

from failatlas.bench_core.repos.cache import (
    CachedRepo,
    CacheEntry,
    default_cache_dir,
    list_repositories,
    repository_for,
)
from failatlas.bench_core.repos.git import GitFailed
from failatlas.bench_core.repos.stage import (
    AddParams,
    AddResult,
    FetchOutcome,
    FetchParams,
    FetchResult,
    add,
    fetch,
)
from failatlas.bench_core.repos.urls import normalise_url

__all__ = [
    "AddParams",
    "AddResult",
    "CacheEntry",
    "CachedRepo",
    "FetchOutcome",
    "FetchParams",
    "FetchResult",
    "GitFailed",
    "add",
    "default_cache_dir",
    "fetch",
    "list_repositories",
    "normalise_url",
    "repository_for",
]

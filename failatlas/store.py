"""The whole store: every package's tables, assembled in the order their tables may depend on each other.

`failatlas.core.store` is the DuckDB handle and knows no stage; this module (top layer) names each package's
`schema` module by a real import, so the dependency is visible, and opens a store migrated to all of them.
docs/STORE.md documents every table.
"""

from __future__ import annotations

import os
from types import ModuleType

from failatlas.bench_core.repos import schema as repos_schema
from failatlas.bench_core.runs import schema as runs_schema
from failatlas.bench_core.scoring import schema as scoring_schema
from failatlas.bench_core.task_validation import schema as task_validation_schema
from failatlas.bench_core.tasks import schema as tasks_schema
from failatlas.cluster import schema as cluster_schema
from failatlas.core import schema as core_schema
from failatlas.core.errors import StoreError
from failatlas.core.llm import schema as llm_schema
from failatlas.core.store import DB_ENV_VAR, DEFAULT_DB, Migration, Store, resolve_db_path
from failatlas.embed import schema as embed_schema
from failatlas.ingest import schema as ingest_schema
from failatlas.taxonomy import schema as taxonomy_schema

# (package id recorded in `schema_migrations`, module). The ids are the names the packages had when their
# migrations shipped; they are data in every store and never change with the code's layout.
SCHEMAS: tuple[tuple[str, ModuleType], ...] = (
    ("failatlas", core_schema),
    ("bench_core.tasks", tasks_schema),
    ("bench_core.repos", repos_schema),
    ("bench_core.llm", llm_schema),
    ("bench_core.runs", runs_schema),
    ("bench_core.scoring", scoring_schema),
    ("bench_core.task_validation", task_validation_schema),
    ("ingest", ingest_schema),
    ("embed", embed_schema),
    ("cluster", cluster_schema),
    ("taxonomy", taxonomy_schema),
)


def all_migrations() -> list[Migration]:
    """Every package's migrations in the order they are applied."""
    found: list[Migration] = []
    for package, module in SCHEMAS:
        migrations = sorted(module.MIGRATIONS, key=lambda m: m.version)
        versions = [m.version for m in migrations]
        if len(set(versions)) != len(versions):
            raise StoreError(f"{module.__name__} declares the same migration version twice: {versions}")
        owners = {m.package for m in migrations}
        if owners - {package}:
            raise StoreError(f"{module.__name__} declares migrations for another package: {sorted(owners)}")
        found.extend(migrations)
    return found


def open_store(path: str | os.PathLike[str] | None = None, *, lock_timeout: float = 120.0) -> Store:
    """A store at `path` (or the default), created and migrated to the newest schema."""
    store = Store(path, lock_timeout=lock_timeout)
    store.migrate(all_migrations())
    return store


__all__ = ["DB_ENV_VAR", "DEFAULT_DB", "SCHEMAS", "Migration", "Store", "all_migrations", "open_store",
           "resolve_db_path"]

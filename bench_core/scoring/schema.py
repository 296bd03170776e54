"""Tables owned by `bench_core.scoring` (documented in docs/STORE.md)."""

from failatlas.store import Migration

MIGRATIONS: list[Migration] = []

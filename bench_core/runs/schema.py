"""Tables owned by `bench_core.runs` (documented in docs/STORE.md)."""

from failatlas.store import Migration

MIGRATIONS: list[Migration] = []

"""Tables owned by `embed` (documented in docs/STORE.md)."""

from failatlas.store import Migration

MIGRATIONS: list[Migration] = []

"""Tables owned by `cluster` (documented in docs/STORE.md)."""

from failatlas.store import Migration

MIGRATIONS: list[Migration] = []

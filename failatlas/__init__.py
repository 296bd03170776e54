"""FailAtlas: run AI-research-experiment benchmarks end to end and mine why agents fail.

Layers, bottom to top: `failatlas.core` (store, errors, LLM client) -> the stages (`bench_core`, `ingest`,
`embed`, `cluster`, `taxonomy`) -> the top (`cli`, `demo`, `store`, the app). docs/ARCHITECTURE.md."""

from failatlas.core.errors import (
    ConfigError,
    FailAtlasError,
    InputError,
    MissingDependencyError,
    StoreError,
    StoreLockedError,
)
from failatlas.core.store import Migration, Store
from failatlas.core.version import __version__

__all__ = [
    "ConfigError",
    "FailAtlasError",
    "InputError",
    "Migration",
    "MissingDependencyError",
    "Store",
    "StoreError",
    "StoreLockedError",
    "__version__",
]

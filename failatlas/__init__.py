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
from failatlas.core.version import __version__

_LAZY = {"Migration": "failatlas.core.store", "Store": "failatlas.core.store"}


def __getattr__(name: str):  # noqa: ANN202 - PEP 562: the store (and DuckDB) load on first use, not on import
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'failatlas' has no attribute {name!r}")

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

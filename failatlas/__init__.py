"""FailAtlas core: the store, the error hierarchy and the command-line entry point shared by every stage."""

from failatlas.errors import (
    ConfigError,
    FailAtlasError,
    InputError,
    MissingDependencyError,
    StoreError,
    StoreLockedError,
)
from failatlas.store import Migration, Store

__version__ = "0.1.0"

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

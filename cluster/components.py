"""Reducers and clusterers: their protocols and their registries by name.

Each registered factory takes keyword hyperparameters (recorded verbatim in `clusterings.params`) and returns an
object that follows scikit-learn's conventions: reducers have `fit_transform(X)`, clusterers `fit_predict(X)`
returning -1 for outliers. A factory carries its own adaptive defaults, `factory.defaults(n, options)`: its
keyword arguments for `n` items given the user's options (the fields of `ClusterParams`, None meaning "adapt").
The built-in ones live in cluster/reducers.py and cluster/clusterers.py; adding one is a new module that
registers its factory with `@REDUCERS.register(name)` / `@CLUSTERERS.register(name)` and `@adaptive(...)`, plus
its import in cluster/__init__.py. Heavy imports (umap, hdbscan, fast_hdbscan) happen inside the factories.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from failatlas.core.registry import Registry


@runtime_checkable
class Reducer(Protocol):
    def fit_transform(self, X: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class Clusterer(Protocol):
    def fit_predict(self, X: np.ndarray) -> np.ndarray: ...


Defaults = Callable[[int, Mapping[str, Any]], dict[str, Any]]
F = TypeVar("F", bound=Callable[..., Any])

REDUCERS: Registry[Reducer] = Registry("reducer")
CLUSTERERS: Registry[Clusterer] = Registry("clusterer")


def adaptive(defaults: Defaults) -> Callable[[F], F]:
    """Decorator: attach `defaults(n, options) -> kwargs` to a factory (see the module's docstring)."""

    def attach(factory: F) -> F:
        factory.defaults = defaults  # type: ignore[attr-defined]
        return factory

    return attach


def _no_defaults(n: int, options: Mapping[str, Any]) -> dict[str, Any]:
    return {}


def reducer_defaults(name: str, n: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of reducer `name` for `n` items. Raises ConfigError for an unknown name."""
    return getattr(REDUCERS.factory(name), "defaults", _no_defaults)(n, options)


def clusterer_defaults(name: str, n: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of clusterer `name` for `n` items. Raises ConfigError for an unknown name."""
    return getattr(CLUSTERERS.factory(name), "defaults", _no_defaults)(n, options)


def make_reducer(name: str, **params: Any) -> Reducer:
    """The reducer registered as `name`, built with `params`. Raises ConfigError for an unknown name."""
    return REDUCERS.create(name, **params)


def make_clusterer(name: str, **params: Any) -> Clusterer:
    """The clusterer registered as `name`, built with `params`. Raises ConfigError for an unknown name."""
    return CLUSTERERS.create(name, **params)

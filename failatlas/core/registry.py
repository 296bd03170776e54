"""Registries by name: how agents, sandboxes, judges, importers, embedders, clusterers and labellers are found.

An extension is a module that registers its factory with a decorator; the package's `__init__` imports its
built-in modules, so adding one is the new module plus one import line. Unknown names and wrong constructor
arguments are `ConfigError`s that list what is known.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from failatlas.core.errors import ConfigError

T = TypeVar("T")


def _origin(factory: object) -> tuple[object, object]:
    return getattr(factory, "__module__", None), getattr(factory, "__qualname__", None)


class Registry(Generic[T]):
    """Factories of one kind of extension (`kind`: "agent", "judge", ...) by name."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: register a factory (a class or a function) under `name`. Registering a name twice with
        another factory is a programming error (ValueError)."""

        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            known = self._factories.get(name)
            if known is not None and known is not factory and _origin(known) != _origin(factory):
                # the same definition imported again (a reloaded module) may re-register; anything else may not
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._factories[name] = factory
            return factory

        return decorate

    def unregister(self, name: str) -> None:
        """Forget `name` (a test that registered a temporary extension cleans up with it)."""
        self._factories.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def factory(self, name: str) -> Callable[..., T]:
        """The factory registered as `name`. Raises ConfigError naming the known ones."""
        try:
            return self._factories[name]
        except KeyError:
            close = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.6)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            shown = [n for n in self.names() if not getattr(self._factories[n], "hidden", False)]
            hidden = len(self._factories) - len(shown)  # factories that declare `hidden = True` (hostile agents)
            more = f" (and {hidden} hidden)" if hidden else ""
            raise ConfigError(f"unknown {self.kind} '{name}'{guess}",
                              hint=f"choose one of: {', '.join(shown) or 'none registered'}{more}") from None

    def create(self, name: str, **params: Any) -> T:
        """An instance of `name` built with `params`. Raises ConfigError for an unknown name or parameters the
        factory does not take."""
        factory = self.factory(name)
        try:
            return factory(**params)
        except TypeError as exc:
            raise ConfigError(f"{self.kind} '{name}' does not take these parameters: {params} ({exc})") from exc

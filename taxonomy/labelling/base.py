"""The labeller protocol and its registry by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from failatlas.core.errors import ConfigError
from failatlas.taxonomy.model import CategoryEvidence, CategoryLabel, TypeEvidence, TypeLabel


@runtime_checkable
class Labeller(Protocol):
    """Names failure types from their evidence (members, keywords and the nearest other types), and the
    categories that group them."""

    name: str

    def label(self, evidence: TypeEvidence) -> TypeLabel: ...

    def label_category(self, evidence: CategoryEvidence) -> CategoryLabel | None:
        """The category's name and definition; None when no name more general than its types' can be given
        (the build then lets its types stand alone)."""
        ...


LABELLERS: dict[str, Callable[..., Labeller]] = {}


def register_labeller(name: str) -> Callable[[Callable[..., Labeller]], Callable[..., Labeller]]:
    """Register a labeller factory under `name` (used by `BuildParams.labeller`)."""

    def decorate(factory: Callable[..., Labeller]) -> Callable[..., Labeller]:
        LABELLERS[name] = factory
        return factory

    return decorate


def make_labeller(name: str, **kwargs: Any) -> Labeller:
    """The labeller registered as `name`, built with `kwargs` (every labeller takes `store=`, where an LLM
    labeller caches and logs its calls), wrapped so that no name of a fragment shape gets through
    (labelling/readable.py). Raises ConfigError for an unknown name."""
    if name not in LABELLERS:
        raise ConfigError(f"unknown labeller '{name}'", hint=f"choose one of: {', '.join(sorted(LABELLERS))}")
    from failatlas.taxonomy.labelling.readable import ReadableNames

    return ReadableNames(LABELLERS[name](**kwargs))  # every shipped generator's names pass the same check

"""One shape for every importer of other tools' files, whatever it produces (task specs, raw insights).

An importer is a class with a `name`, a one-line `description`, an `Options` pydantic model holding its own
options, `sniff(path) -> bool` (a cheap look at a file or folder) and `load(path, options) -> Loaded` (reads and
validates all of it, or raises InputError naming file, line and field; never touches the store). Each kind of
record has one `ImporterRegistry`; an importer registers itself with `@REGISTRY.register("name")`, so adding one
is the new module plus one import line in its package's `__init__`. Format choices and auto-detection come from
the registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from failatlas.core.errors import ConfigError, InputError
from failatlas.core.registry import Registry

R = TypeVar("R")
AUTO = "auto"


class NoOptions(BaseModel):
    """The options of an importer that takes none."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class Loaded(Generic[R]):
    """What one file (or folder) held: its records, plus warnings and what was left out on purpose."""

    path: Path
    format: str
    records: list[R] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class Importer(Protocol[R]):
    """Reads one format. `suffixes`: the file suffixes it reads (folder walks look at those files);
    `sniff_order`: lower is tried first by auto-detection (specific formats before generic ones)."""

    name: ClassVar[str]
    description: ClassVar[str]
    Options: ClassVar[type[BaseModel]]
    suffixes: ClassVar[tuple[str, ...]]
    sniff_order: ClassVar[int]

    def sniff(self, path: Path) -> bool: ...

    def load(self, path: Path, options: Any) -> Loaded[R]: ...


class ImporterRegistry(Registry[Importer[R]]):
    """The importers of one kind of record, by format name."""

    def get(self, name: str) -> Importer[R]:
        """The importer registered as `name`; ConfigError naming the known ones otherwise."""
        self.check_format(name)
        return self.create(name)

    def choices(self) -> list[str]:
        """`auto` followed by every registered format: what a `--format` option accepts."""
        return [AUTO, *self.names()]

    def check_format(self, fmt: str) -> str:
        """`fmt` if it is `auto` or a registered format; ConfigError listing the choices otherwise."""
        if fmt not in self and fmt != AUTO:
            raise ConfigError(f"unknown {self.kind} format '{fmt}'", hint="use one of: " + ", ".join(self.choices()))
        return fmt

    def in_sniff_order(self) -> list[Importer[R]]:
        importers = [self.get(name) for name in self.names()]
        return sorted(importers, key=lambda imp: (getattr(imp, "sniff_order", 50), imp.name))

    def suffixes(self) -> set[str]:
        """Every file suffix some importer reads."""
        return {suffix for imp in self.in_sniff_order() for suffix in imp.suffixes}

    def detect(self, path: Path) -> str | None:
        """The first format (in sniff order) whose importer recognises `path`, or None."""
        return next((imp.name for imp in self.in_sniff_order() if imp.sniff(path)), None)

    def option_names(self) -> set[str]:
        return {name for imp in self.in_sniff_order() for name in imp.Options.model_fields}

    def options(self, name: str, values: Mapping[str, Any]) -> BaseModel:
        """Importer `name`'s Options built from the entries of `values` it declares (others are for other
        importers). Raises InputError naming the field of a bad value."""
        model = self.get(name).Options
        try:
            return model.model_validate({k: v for k, v in values.items() if k in model.model_fields})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(str(first["msg"]).removeprefix("Value error, "),
                             field=str(first["loc"][0]) if first["loc"] else None) from exc

    def check_options(self, values: Mapping[str, Any], fmt: str = AUTO) -> None:
        """Validate `values` before anything is read: with a chosen format, against that importer alone (an option
        it does not take is a ConfigError); with `auto`, against every importer that declares a key (a key none
        declares is a ConfigError). A bad value is an InputError naming the field."""
        fmt = self.check_format(fmt)
        if fmt != AUTO:
            declared = set(self.get(fmt).Options.model_fields)
            unknown = sorted(set(values) - declared)
            if unknown:
                raise ConfigError(f"the {self.kind} format '{fmt}' takes no option {', '.join(unknown)}",
                                  hint="its options: " + (", ".join(sorted(declared)) or "none"))
            self.options(fmt, values)
            return
        unknown = sorted(set(values) - self.option_names())
        if unknown:
            raise ConfigError(f"no {self.kind} importer takes the option(s) {', '.join(unknown)}",
                              hint="known options: " + ", ".join(sorted(self.option_names())))
        for imp in self.in_sniff_order():
            if set(values) & set(imp.Options.model_fields):
                self.options(imp.name, values)

    def load(self, path: Path, fmt: str = AUTO, options: Mapping[str, Any] | None = None) -> Loaded[R]:
        """Read one file or folder in format `fmt` (or the detected one). Raises InputError when no importer
        recognises it or it is malformed, ConfigError for an unknown format."""
        name = self.check_format(fmt)
        if name == AUTO:
            detected = self.detect(path)
            if detected is None:
                raise InputError(f"cannot tell the {self.kind} format of this file", path=str(path),
                                 hint="pass --format " + "|".join(self.names()))
            name = detected
        return self.get(name).load(path, self.options(name, options or {}))


__all__ = ["AUTO", "Importer", "ImporterRegistry", "Loaded", "NoOptions"]

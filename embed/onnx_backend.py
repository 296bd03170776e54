"""ONNX Runtime for a sentence-transformers model's transformer on the CPU: the same vectors, about twice as fast.

On a CPU the transformer's forward pass is nearly all of embedding's time, and ONNX Runtime runs BERT-sized
encoders about 1.8-1.9x faster than PyTorch's eager mode on these 2-core machines (benchmarks/RESULTS.md).
The model's transformer is exported once per model revision and library versions (PyTorch's TorchScript
exporter, fp32, nothing quantised) into the model cache (`embed.sources.model_cache_dir()/onnx`), written
atomically; later processes load the file. Only the transformer runs in ONNX Runtime: tokenising, pooling and
normalisation stay the model's own sentence-transformers modules, so the vectors equal the PyTorch ones to
float rounding (max abs difference ~2e-7, tested).

Used by `SentenceTransformerEmbedder`'s fast path (`embed.fast_encode.FastEncoder`) on the CPU when `onnxruntime`
is installed (the `mining` extra); `FAILATLAS_EMBED_BACKEND=torch` turns it off, and a model that fails to
export falls back to PyTorch with a warning.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from embed.sources import model_cache_dir

log = logging.getLogger(__name__)
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_available() -> bool:
    """Whether ONNX Runtime is installed and not turned off by FAILATLAS_EMBED_BACKEND=torch."""
    if os.environ.get("FAILATLAS_EMBED_BACKEND", "auto") == "torch":
        return False
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _versions() -> str:
    return ",".join(
        f"{p}=={importlib.metadata.version(p)}" for p in ("torch", "transformers", "onnxruntime")
    )


def export_path(revision: str, cache: Path | None = None) -> Path:
    """Where the exported transformer of the model at `revision` lives."""
    key = hashlib.sha256(f"{revision}\x1f{_versions()}".encode()).hexdigest()[:16]
    return (cache or model_cache_dir()) / "onnx" / f"{key}.onnx"


def _last_hidden_state(hf_model, names: list[str]):  # noqa: ANN001, ANN202
    """A torch module calling the HF model with positional `names` and returning last_hidden_state only."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = hf_model

        def forward(self, *inputs):  # noqa: ANN002, ANN202
            return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    return LastHiddenState().eval()


def export(st, path: Path) -> list[str]:  # noqa: ANN001
    """Export the transformer of the SentenceTransformer `st` to `path` (atomically); returns its input names."""
    import torch

    tokenizer = st.tokenizer
    sample = tokenizer(["an example sentence", "a second, longer example sentence"], padding=True,
                       return_tensors="pt")
    names = [k for k in _INPUTS if k in sample]
    wrapped = _last_hidden_state(st[0].auto_model, names)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes it records as constants
            torch.onnx.export(
                wrapped,
                tuple(sample[k] for k in names),
                tmp,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={k: {0: "batch", 1: "tokens"} for k in [*names, "last_hidden_state"]},
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return names


class OnnxTransformer:
    """The transformer (first module) of a SentenceTransformer `st`, run by ONNX Runtime on the CPU: called with the
    token features of a batch, returns its token embeddings as a torch tensor, as `st[0]` would."""

    _lock = threading.Lock()

    def __init__(self, st, revision: str, cache: Path | None = None) -> None:  # noqa: ANN001
        import onnxruntime as ort

        self.path = export_path(revision, cache)
        with self._lock:
            if not self.path.is_file():
                log.info("exporting the embedding model's transformer to %s (once)", self.path)
                export(st, self.path)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def __call__(self, features: dict[str, Any]):  # noqa: ANN204 - a torch.Tensor
        import torch

        feed = {k: features[k].numpy().astype(np.int64, copy=False) for k in self.inputs}
        return torch.from_numpy(self.session.run(None, feed)[0])

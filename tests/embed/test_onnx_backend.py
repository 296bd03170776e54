"""ONNX Runtime for the transformer on the CPU, against PyTorch, on the real packaged all-MiniLM-L6-v2."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from embed import SentenceTransformerEmbedder, get_embedder
from failatlas.errors import ConfigError
from tests.embed.test_fast_encode import ODD, _statements


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def onnx(model_cache) -> SentenceTransformerEmbedder:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAILATLAS_MODEL_CACHE", str(model_cache))
        embedder = get_embedder(device="cpu")
        assert embedder.encode_path == "fast+onnx"  # the CPU default once onnxruntime is installed
    return embedder


@pytest.fixture(scope="module")
def torch_plain() -> SentenceTransformerEmbedder:
    return get_embedder(device="cpu", fast=False)


@pytest.mark.parametrize("batch_size", [1, 7, 64, 1000])
def test_vectors_equal_pytorchs_to_float_rounding(onnx, torch_plain, batch_size):
    texts = ODD + _statements(150, seed=batch_size)
    got, want = onnx.encode(texts, batch_size=batch_size), torch_plain.encode(texts, batch_size=64)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_the_export_is_written_once_and_reused(onnx, model_cache):
    files = list((model_cache / "onnx").glob("*.onnx"))
    assert len(files) == 1 and not list((model_cache / "onnx").glob("*.tmp"))
    before = files[0].stat().st_mtime_ns
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAILATLAS_MODEL_CACHE", str(model_cache))
        again = get_embedder(device="cpu")
        assert again.encode_path == "fast+onnx"
    assert files[0].stat().st_mtime_ns == before


def test_torch_can_be_chosen_by_argument_or_environment(monkeypatch):
    assert get_embedder(device="cpu", backend="torch").encode_path == "fast"
    monkeypatch.setenv("FAILATLAS_EMBED_BACKEND", "torch")
    assert get_embedder(device="cpu").encode_path == "fast"
    with pytest.raises(ConfigError, match="backend"):
        get_embedder(device="cpu", backend="tensorrt")


def test_a_failed_export_falls_back_to_pytorch_with_a_warning_unless_onnx_was_asked_for(
    tmp_path, monkeypatch, caplog, torch_plain
):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("FAILATLAS_MODEL_CACHE", str(blocker))
    with caplog.at_level(logging.WARNING, logger="embed.models"):
        embedder = get_embedder(device="cpu")
        assert embedder.encode_path == "fast"
    assert "ONNX export" in caplog.text
    texts = _statements(20)
    assert np.abs(embedder.encode(texts) - torch_plain.encode(texts)).max() < 1e-5
    with pytest.raises(OSError):
        get_embedder(device="cpu", backend="onnx").encode_path  # noqa: B018 - loading raises

"""The numpy encoder (`embed/numpy_bert.py`) against sentence-transformers' own encode, on the real packaged
all-MiniLM-L6-v2, on the CPU; which folders it refuses, and that a small CPU job never imports torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from failatlas.embed import SentenceTransformerEmbedder, get_embedder
from failatlas.embed.models import packaged_model_dir
from failatlas.embed.numpy_bert import NumpyBert, erf32, obstacle
from tests.embed.test_fast_encode import ODD, _statements


@pytest.fixture(scope="module")
def plain() -> SentenceTransformerEmbedder:
    embedder = get_embedder(device="cpu", fast=False)
    assert embedder.encode_path == "plain"
    return embedder


@pytest.fixture(scope="module")
def encoder() -> NumpyBert:
    found, why = NumpyBert.for_folder(packaged_model_dir())
    assert why is None and found is not None
    return found


def test_erf32_is_within_4e_7_of_the_exact_erf():
    from scipy.special import erf

    x = np.concatenate([np.linspace(-12, 12, 2_000_001), [0.0, -0.0, np.inf, -np.inf]]).astype(np.float32)
    got = erf32(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.abs(got.astype(np.float64) - erf(x.astype(np.float64))).max() < 4e-7
    assert np.diff(got[:-4]).min() > -1e-6  # monotone but for float32 rounding near the clip
    assert np.isnan(erf32(np.array([np.nan], np.float32)))[0]


def test_token_ids_equal_the_models_own(encoder, plain):
    texts = ODD + _statements(200)
    own = plain._load().preprocess(texts)
    ids, mask = encoder.tokenise(texts)
    np.testing.assert_array_equal(ids, own["input_ids"].numpy())
    np.testing.assert_array_equal(mask, own["attention_mask"].numpy())
    assert int(mask[len(ODD) - 1].sum()) == 256  # the long text, truncated where the model truncates


@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_vectors_equal_sentence_transformers(encoder, plain, batch_size):
    texts = ODD + _statements({1: 6, 7: 40}.get(batch_size, 150), seed=batch_size)
    got = encoder.encode(texts, batch_size)
    want = plain.encode(texts, batch_size=batch_size)
    assert got.dtype == np.float32 and got.shape == (len(texts), 384)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_chunks_cover_every_text_once_with_the_vectors_of_encode(encoder):
    texts = ODD[:-1] + _statements(60, seed=4)
    whole = encoder.encode(texts, 8)
    sizes = [9, 30, 1, len(texts) - 40]
    seen = np.zeros(len(texts), dtype=int)
    got = np.zeros_like(whole)
    for (positions, vectors), size in zip(encoder.encode_chunks(texts, 8, sizes), sizes, strict=True):
        assert len(positions) == len(vectors) == size
        seen[positions] += 1
        got[positions] = vectors
    assert (seen == 1).all()
    np.testing.assert_allclose(got, whole, atol=1e-6)
    with pytest.raises(ValueError, match="do not cover"):
        list(encoder.encode_chunks(texts, 8, [1]))


def test_the_embedder_takes_the_numpy_path_up_to_its_limit_and_torch_above(plain):
    texts = _statements(30, seed=9)
    embedder = SentenceTransformerEmbedder(device="cpu")
    assert embedder.encode_path == "numpy" and embedder.dim == 384
    small = embedder.encode(texts, batch_size=16)
    assert embedder._st is None  # torch's model never loaded
    embedder.NUMPY_MAX = 10
    large = embedder.encode(texts, batch_size=16)
    assert embedder._st is not None and embedder._fast_encoder is not None
    np.testing.assert_allclose(small, large, atol=1e-5)
    np.testing.assert_allclose(small, plain.encode(texts, batch_size=16), atol=1e-5)
    assert SentenceTransformerEmbedder(device="cpu", precision="int8")._numpy_encoder() is None  # other vectors
    assert SentenceTransformerEmbedder(device="cpu", fast=False)._numpy_encoder() is None


def test_a_small_cpu_job_imports_neither_torch_nor_sentence_transformers(tmp_path):
    """Asked on a host without GPU device files (here: a list of device files that do not exist, so the test means
    the same on a GPU host), the default device is the CPU without asking torch, and the numpy path encodes."""
    code = ("import sys, json; from failatlas.embed import models, get_embedder;"
            f" models.GPU_DEVICE_FILES = ({str(tmp_path / 'nvidia0')!r},); e = get_embedder();"
            " v = e.encode(['CUDA out of memory', 'the agent never ran the experiment'], batch_size=8);"
            " print(json.dumps([e.encode_path, e.device, list(v.shape), [m for m in ('torch', 'transformers',"
            " 'sentence_transformers') if m in sys.modules]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["numpy", "cpu", [2, 384], []]


def _folder(tmp_path, **changes):
    """A copy of the packaged model's folder (weights linked) with `changes`: file name -> new JSON (bytes: as
    they are)."""
    source = packaged_model_dir()
    dest = tmp_path / "model"
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("model.safetensors"))
    (dest / "model.safetensors").symlink_to(source / "model.safetensors")
    for name, value in changes.items():
        path = dest / name.replace("__", "/")
        path.write_bytes(value) if isinstance(value, bytes) else path.write_text(json.dumps(value))
    return dest


def test_folders_it_cannot_encode_say_why_and_use_torch(tmp_path):
    config = json.loads((packaged_model_dir() / "config.json").read_text())
    modules = json.loads((packaged_model_dir() / "modules.json").read_text())
    pooling = json.loads((packaged_model_dir() / "1_Pooling" / "config.json").read_text())
    assert obstacle(_folder(tmp_path / "same")) is None
    cases = {
        "hidden_act": ({"config.json": {**config, "hidden_act": "relu"}}, "hidden_act"),
        "model_type": ({"config.json": {**config, "model_type": "roberta"}}, "model_type"),
        "positions": ({"config.json": {**config, "position_embedding_type": "relative_key"}}, "position"),
        "dense": ({"modules.json": [*modules, {"idx": 3, "name": "3", "path": "3_Dense",
                                               "type": "sentence_transformers.models.Dense"}]}, "modules"),
        "cls": ({"1_Pooling__config.json": {**pooling, "pooling_mode_cls_token": True}}, "pooling"),
        "prompts": ({"config_sentence_transformers.json": {"prompts": {"query": "query: "}}}, "prompts"),
        "broken": ({"config.json": "not an object"}, "not JSON objects"),
        "unreadable": ({"modules.json": b"[{"}, "cannot be read"),
    }
    for name, (changes, reason) in cases.items():
        folder = _folder(tmp_path / name, **changes)
        why = obstacle(folder)
        assert why is not None and reason in why, (name, why)
        assert NumpyBert.for_folder(folder) == (None, why)
    folder = _folder(tmp_path / "relu", **cases["hidden_act"][0])
    assert SentenceTransformerEmbedder(str(folder), device="cpu")._numpy_encoder() is None
    no_weights = _folder(tmp_path / "bare")
    (no_weights / "model.safetensors").unlink()
    assert "model.safetensors" in obstacle(no_weights)


def test_weights_that_do_not_match_the_configuration_are_refused(tmp_path):
    from safetensors.numpy import load_file, save_file

    config = json.loads((packaged_model_dir() / "config.json").read_text())
    odd_heads = _folder(tmp_path / "heads", **{"config.json": {**config, "num_attention_heads": 7}})
    assert NumpyBert.for_folder(odd_heads)[0] is None and "not a BERT" in NumpyBert.for_folder(odd_heads)[1]
    corrupt = _folder(tmp_path / "corrupt")
    (corrupt / "model.safetensors").unlink()
    (corrupt / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json" + bytes(64))
    found, why = NumpyBert.for_folder(corrupt)
    assert found is None and why
    weights = load_file(str(packaged_model_dir() / "model.safetensors"))
    del weights["encoder.layer.5.output.dense.bias"]
    weights["encoder.layer.0.intermediate.dense.weight"] = weights["encoder.layer.0.intermediate.dense.weight"][:-1]
    folder = _folder(tmp_path / "shapes")
    (folder / "model.safetensors").unlink()
    save_file(weights, str(folder / "model.safetensors"))
    found, why = NumpyBert.for_folder(folder)
    assert found is None and "encoder.layer.0.intermediate.dense.weight" in why, why
    del weights["encoder.layer.0.intermediate.dense.weight"]  # the next problem: a weight that is not there
    save_file(weights, str(folder / "model.safetensors"))
    assert "missing" in NumpyBert.for_folder(folder)[1]
    assert SentenceTransformerEmbedder(str(corrupt), device="cpu")._numpy_encoder() is None


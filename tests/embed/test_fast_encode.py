"""The fast encode path (Rust tokenizer ahead of the model) against sentence-transformers' own, on the real
packaged all-MiniLM-L6-v2, on CPU."""

from __future__ import annotations

import random

import numpy as np
import pytest

from failatlas.embed import SentenceTransformerEmbedder, get_embedder
from failatlas.embed.fast_encode import FastEncoder

WORDS = ["model", "train", "CUDA", "memory", "NaN", "loss", "import", "failed", "baseline", "seed", "GPU", "epoch"]
ODD = [
    "",
    "   ",
    "x",
    "ModuleNotFoundError: No module named 'torch'",
    "  leading and trailing spaces  ",
    "UPPER case Mixed CaSe",
    "Überprüfung fehlgeschlagen: naïve café résumé",
    "数据集缺失，训练失败",
    "emoji 🚀🔥 and symbols ©®™ → ≠",
    "tab\tnew\nline\r\nand\u00a0nbsp and zero\u200bwidth",
    "[CLS] [SEP] [PAD] [MASK] special-looking tokens",
    " ".join(f"step{i} failed with error code {i * 7}" for i in range(120)),  # far past 256 tokens
]


def _statements(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))) for _ in range(n)]


@pytest.fixture(scope="module")
def fast() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder(device="cpu", numpy=False)  # the numpy encoder: test_numpy_bert.py
    assert embedder.encode_path == "fast"
    return embedder


@pytest.fixture(scope="module")
def plain() -> SentenceTransformerEmbedder:
    embedder = get_embedder(device="cpu", fast=False)
    assert embedder.encode_path == "plain"
    return embedder


def test_rust_token_ids_equal_the_models_own(fast):
    st = fast._load()
    texts = ODD + _statements(200)
    own = st.preprocess(texts)
    mine = FastEncoder.for_model(st).tokenise(texts)
    assert set(mine) == {"input_ids", "attention_mask", "token_type_ids"}
    for key, tensor in mine.items():
        np.testing.assert_array_equal(tensor.numpy(), own[key].numpy(), err_msg=key)
    long_row = ODD.index(ODD[-1])
    assert int(mine["attention_mask"][long_row].sum()) == st.max_seq_length == 256


@pytest.mark.parametrize("batch_size", [1, 5, 64, 1000])
def test_vectors_equal_the_plain_encode(fast, plain, batch_size):
    short = ODD[:-1] if batch_size > 64 else ODD  # the long text pads a whole batch to 256 tokens: costly on CPU
    texts = short + _statements({1: 4, 5: 30}.get(batch_size, 150))
    got = fast.encode(texts, batch_size=batch_size)
    want = plain.encode(texts, batch_size=batch_size)
    assert got.dtype == np.float32 and got.shape == (len(texts), 384)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_tokenising_in_a_background_thread_gives_the_same_vectors(fast):
    texts = ODD[:-1] + _statements(100, seed=2)
    encoder = fast._fast_encoder
    np.testing.assert_array_equal(encoder.encode(texts, 8, prefetch=True), encoder.encode(texts, 8, prefetch=False))


def test_order_is_the_callers_and_duplicates_get_one_vector(fast):
    texts = _statements(150, seed=1)
    texts = texts + texts[:40] + ["CUDA out of memory"] * 5
    vectors = fast.encode(texts, batch_size=16)
    reversed_vectors = fast.encode(texts[::-1], batch_size=16)
    np.testing.assert_allclose(reversed_vectors[::-1], vectors, atol=1e-6)
    np.testing.assert_allclose(vectors[150:190], vectors[:40], atol=1e-6)
    np.testing.assert_allclose(vectors[-5:], np.repeat(vectors[-1:], 5, axis=0), atol=1e-6)
    alone = np.vstack([fast.encode([t], batch_size=1) for t in texts[:10]])
    np.testing.assert_allclose(vectors[:10], alone, atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])


def test_single_text_and_batch_larger_than_the_input(fast, plain):
    one = fast.encode(["the judge dropped part of the diff"], batch_size=512)
    assert one.shape == (1, 384)
    np.testing.assert_allclose(one, plain.encode(["the judge dropped part of the diff"], batch_size=512), atol=1e-5)
    assert fast.encode([], batch_size=8).shape == (0, 384)


@pytest.mark.parametrize("prefetch", [False, True])
def test_a_text_the_tokenizer_rejects_raises_instead_of_hanging(fast, prefetch):
    texts = ["fine"] * 8 + [b"not text"] + ["also fine"] * 8  # bytes: sortable by length, rejected by Rust
    with pytest.raises(TypeError, match="TextEncodeInput"):
        fast._fast_encoder.encode(texts, 2, prefetch=prefetch)
    assert fast.encode(["still works"], batch_size=1).shape == (1, 384)


def test_models_the_fast_path_cannot_serve_use_the_plain_encode(fast, tmp_path):
    st = fast._load()
    st.prompts, st.default_prompt_name = {"query": "query: "}, "query"
    try:
        assert FastEncoder.for_model(st) is None
    finally:
        st.prompts, st.default_prompt_name = {"query": "", "document": ""}, None
    assert FastEncoder.for_model(st) is not None

    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import StaticEmbedding
    weights = np.random.default_rng(0).normal(size=(st.tokenizer.vocab_size, 32)).astype(np.float32)
    static = SentenceTransformer(modules=[StaticEmbedding(st.tokenizer.backend_tokenizer, weights)], device="cpu")
    static.save(str(tmp_path / "static"))
    embedder = SentenceTransformerEmbedder(str(tmp_path / "static"), device="cpu")
    assert embedder.encode_path == "plain"  # a bare Rust tokenizer, no transformers fast tokenizer around it
    vectors = embedder.encode(["CUDA out of memory", "missing baseline"], batch_size=2)
    assert vectors.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("path", ["fast", "plain"])
def test_encode_chunks_cover_every_text_once_with_the_vectors_of_encode(path, fast, plain):
    embedder = fast if path == "fast" else plain
    texts = ODD + _statements(150, seed=3)
    whole = embedder.encode(texts, batch_size=16)
    sizes = [40, 33, 16, 1, len(texts) - 90]
    seen = np.zeros(len(texts), dtype=int)
    got = np.zeros_like(whole)
    for (positions, vectors), size in zip(embedder.encode_chunks(texts, 16, sizes), sizes, strict=True):
        assert len(positions) == len(vectors) == size
        seen[positions] += 1
        got[positions] = vectors
    assert (seen == 1).all()
    np.testing.assert_allclose(got, whole, atol=1e-5)


def test_encode_chunks_refuses_sizes_that_do_not_cover_the_texts(fast):
    with pytest.raises(ValueError, match="add up to"):
        list(fast.encode_chunks(["a", "b", "c"], 2, [1, 1]))

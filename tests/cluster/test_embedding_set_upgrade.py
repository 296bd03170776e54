"""A store from before embedding sets upgrades without losing a vector: embed's migration 2 moves the old
`embeddings` rows into sets (FLOAT[dim] tables), cluster's migration 3 records each clustering's set, taxonomy's
migration 2 each taxonomy's."""

from __future__ import annotations

import json

import numpy as np

from failatlas.core.store import Store
from failatlas.embed import get_set, load_insight_vectors, set_id
from failatlas.store import all_migrations, open_store
from tests.cluster.trail import insight_id

NEW = {"embed:002_embedding_sets", "cluster:003_clusterings_embedding_set", "taxonomy:002_taxonomies_embedding_set"}


def test_old_embeddings_move_into_sets_and_clusterings_and_taxonomies_name_theirs(db_path):
    old = Store(db_path)
    old.migrate([m for m in all_migrations() if m.id not in NEW])
    rng = np.random.default_rng(0)
    texts = ["the agent skipped the tests", "the judge timed out", "CUDA out of memory"]
    v384 = rng.standard_normal((3, 384)).astype(np.float32)
    v768 = rng.standard_normal((3, 768)).astype(np.float32)
    v5 = rng.standard_normal((3, 5)).astype(np.float32)
    from failatlas.core.hashing import text_hash

    with old.write() as conn:
        conn.executemany("INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, 'execution', ?, 1)",
                         [(insight_id("execution", t), t) for t in texts])
        for model, revision, vectors in (("all-MiniLM-L6-v2", "r1", v384), ("all-MiniLM-L6-v2", "r2", v384 + 1),
                                         ("all-mpnet-base-v2", "m1", v768), ("tiny", "t1", v5)):
            conn.executemany(
                "INSERT INTO embeddings (text_hash, model, revision, normalisation, dim, vector)"
                " VALUES (?, ?, ?, 'none', ?, ?)",
                [(text_hash(t), model, revision, vectors.shape[1], [float(x) for x in v])
                 for t, v in zip(texts, vectors, strict=True)],
            )
        conn.execute(
            "INSERT INTO clusterings (id, phase, embed_model, params, n_insights, n_clusters, outlier_rate,"
            " code_version) VALUES ('cl-old', 'execution', 'all-MiniLM-L6-v2', ?, 3, 1, 0, 'old')",
            [json.dumps({"embed_revision": "r1", "normalisation": "none"})],
        )
        conn.execute(
            "INSERT INTO taxonomies (id, version, clustering_ids, embed_model, normalisation, params, code_version)"
            " VALUES ('tx-old', 1, '[\"cl-old\"]', 'all-MiniLM-L6-v2', 'none', '{}', 'old')"
        )

    store = open_store(db_path)
    assert set(store.applied_migrations()) >= NEW
    sets = {(r[0], r[1]): r[2:] for r in store.query(
        "SELECT model, revision, id, dim, vectors_table FROM embedding_sets")}
    assert sets[("all-MiniLM-L6-v2", "r1")] == (set_id("all-MiniLM-L6-v2", "r1", "none"), 384,
                                                "embedding_vectors_384")
    assert sets[("all-mpnet-base-v2", "m1")][1:] == (768, "embedding_vectors_768")
    assert sets[("tiny", "t1")][1:] == (5, "embedding_vectors_legacy")
    assert "embeddings" not in store.tables()
    for (model, revision), vectors in {("all-MiniLM-L6-v2", "r1"): v384, ("all-MiniLM-L6-v2", "r2"): v384 + 1,
                                       ("all-mpnet-base-v2", "m1"): v768, ("tiny", "t1"): v5}.items():
        loaded = load_insight_vectors(store, sets[(model, revision)][0])
        order = [loaded.ids.index(insight_id("execution", t)) for t in texts]
        np.testing.assert_array_equal(loaded.vectors[order], vectors)
    assert store.query("SELECT embedding_set_id FROM clusterings WHERE id = 'cl-old'")[0][0] == sets[
        ("all-MiniLM-L6-v2", "r1")][0]
    assert store.query("SELECT embedding_set_id FROM taxonomies WHERE id = 'tx-old'")[0][0] == sets[
        ("all-MiniLM-L6-v2", "r1")][0]
    assert get_set(store, sets[("tiny", "t1")][0]).dim == 5

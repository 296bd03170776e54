"""Filling a store with realistic rows of the tables the taxonomy reads (insights, sources, runs, embedding sets,
clusterings), as the ingest, embed, cluster and bench stages would write them (vectors through embed's writes)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from failatlas.embed import set_id
from failatlas.embed.writes import ensure_set, write_vectors
from failatlas.store import Store

TEST_EMBED_MODEL = "tfidf-svd-64 (test)"
TEST_REVISION = "test"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def insight_id(phase: str, text: str) -> str:
    return hashlib.sha256(f"{phase}\n{text}".encode()).hexdigest()[:16]


def lsa_vectors(texts: Sequence[str], dim: int = 64, seed: int = 0) -> np.ndarray:
    """Quick, deterministic sentence vectors (TF-IDF then truncated SVD), unit length."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    tfidf = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, stop_words="english").fit_transform(texts)
    vecs = TruncatedSVD(n_components=min(dim, tfidf.shape[1] - 1), random_state=seed).fit_transform(tfidf)
    return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


def _bulk_insert(
    store: Store,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    types: dict[str, object],
) -> None:
    frame = pl.DataFrame([list(r) for r in rows], schema={c: types[c] for c in columns}, orient="row")
    with store.write() as conn:
        conn.register("bulk_rows", frame.to_arrow())
        conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(columns)} FROM bulk_rows")
        conn.unregister("bulk_rows")


SOURCE_COLUMNS = (
    "insight_id",
    "source_key",
    "origin",
    "source_file",
    "source_line",
    "label",
    "run_id",
    "task_id",
    "agent",
    "model",
    "benchmark",
)


def add_insights(store: Store, rows: Sequence[dict]) -> list[str]:
    """rows: {phase, text, and optional run_id, task_id, agent, model, benchmark, label, origin}. One source
    row each; the same (phase, text) twice becomes one insight with two occurrences. Returns insight ids per
    row."""
    ids = [insight_id(r["phase"], r["text"]) for r in rows]
    insights: dict[str, list] = {}
    for iid, r in zip(ids, rows, strict=True):
        if iid in insights:
            insights[iid][3] += 1
        else:
            insights[iid] = [iid, r["phase"], r["text"], 1]
    _bulk_insert(
        store,
        "insights",
        ("id", "phase", "text", "n_occurrences"),
        list(insights.values()),
        {"id": pl.Utf8, "phase": pl.Utf8, "text": pl.Utf8, "n_occurrences": pl.Int32},
    )
    sources = [
        [
            iid,
            r.get("source_key", f"{r.get('origin', 'jsonl')}:{n}:{iid}"),
            r.get("origin", "jsonl"),
            r.get("source_file"),
            r.get("source_line"),
            r.get("label"),
            r.get("run_id"),
            r.get("task_id"),
            r.get("agent"),
            r.get("model"),
            r.get("benchmark"),
        ]
        for n, (iid, r) in enumerate(zip(ids, rows, strict=True))
    ]
    types = dict.fromkeys(SOURCE_COLUMNS, pl.Utf8) | {"source_line": pl.Int32}
    _bulk_insert(store, "insight_sources", SOURCE_COLUMNS, sources, types)
    return ids


def add_embeddings(
    store: Store,
    texts: Sequence[str],
    vectors: np.ndarray,
    model: str = TEST_EMBED_MODEL,
    *,
    revision: str = TEST_REVISION,
    normalisation: str = "none",
) -> str:
    """Store `vectors` of `texts` (hashed as given) in the embedding set of (model, revision, normalisation), as
    the embed stage writes them; returns the set's id."""
    hashes, rows = [], []
    for text, vec in zip(texts, np.asarray(vectors, dtype=np.float32), strict=True):
        if text_hash(text) not in hashes:
            hashes.append(text_hash(text))
            rows.append(vec)
    with store.write() as conn:
        embedding_set = ensure_set(conn, model, revision, normalisation, len(rows[0]))
        write_vectors(conn, embedding_set, hashes, np.stack(rows))
    return embedding_set.id


def add_clustering(
    store: Store,
    clustering_id: str,
    phase: str | None,
    insight_ids: Sequence[str],
    labels: Sequence[int],
    model: str = TEST_EMBED_MODEL,
    params: dict | None = None,
    embedding_set_id: str | None = None,
) -> None:
    """A clustering as the cluster stage writes it, of the vectors in `embedding_set_id` (default: the set of
    `model` at TEST_REVISION with the normalisation `params` names)."""
    labels = [int(x) for x in labels]
    embedding_set_id = embedding_set_id or set_id(model, TEST_REVISION, (params or {}).get("normalisation", "none"))
    n_clusters = len({x for x in labels if x >= 0})
    with store.write() as conn:
        conn.execute(
            "INSERT INTO clusterings (id, phase, embed_model, embedding_set_id, params, n_insights, n_clusters,"
            " outlier_rate, code_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'test')",
            [
                clustering_id,
                phase,
                model,
                embedding_set_id,
                json.dumps(params or {"method": "kmeans (test)"}),
                len(labels),
                n_clusters,
                sum(x < 0 for x in labels) / max(len(labels), 1),
            ],
        )
    _bulk_insert(
        store,
        "cluster_assignments",
        ("clustering_id", "insight_id", "cluster", "x", "y"),
        [
            [clustering_id, i, lab, float(k), float(lab)]
            for k, (i, lab) in enumerate(zip(insight_ids, labels, strict=True))
        ],
        {
            "clustering_id": pl.Utf8,
            "insight_id": pl.Utf8,
            "cluster": pl.Int32,
            "x": pl.Float64,
            "y": pl.Float64,
        },
    )


def load_trail(path: Path) -> list[dict]:
    """TRAIL GAIA errors as insight rows (phase 'execution'; one trace = one run of one GAIA task)."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        rec = json.loads(line)
        if not rec.get("description"):
            continue
        rows.append(
            {
                "phase": "execution",
                "text": rec["description"],
                "origin": "trail",
                "label": rec["category"],
                "run_id": f"trail-{rec['trace_id']}",
                "task_id": f"gaia-{rec['trace_id'][:8]}",
                "agent": "open_deep_research",
                "model": None,
                "benchmark": "gaia",
                "source_file": path.name,
                "source_line": n,
                "source_key": f"trail:{rec['trace_id']}:{rec['error_idx']}",
            }
        )
    return rows

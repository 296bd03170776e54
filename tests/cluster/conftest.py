from __future__ import annotations

import numpy as np
import pytest

from failatlas.cluster import ClusteringResult, ClusterParams
from failatlas.cluster import run as run_cluster
from failatlas.core.hashing import text_hashes
from failatlas.embed.models import resolve_model
from failatlas.embed.writes import ensure_set, write_vectors
from tests.cluster.trail import insight_id


def blobs(n_per: int, centres: int, dim: int = 24, seed: int = 0, spread: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(centres, dim))
    points = np.concatenate([m + spread * rng.normal(size=(n_per, dim)) for m in means])
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def blob_store(store):
    """A store with 3 phases' worth of insights whose cached vectors form clear blobs, plus human labels:
    'execution' has 3 blobs of 20 and 4 far-away singletons; 'design' has 2 blobs of 15."""
    _, revision = resolve_model("all-MiniLM-L6-v2")
    rows, vectors = [], []
    for phase, n_per, centres, seed in (("execution", 20, 3, 0), ("design", 15, 2, 1)):
        pts = blobs(n_per, centres, seed=seed)
        for i, v in enumerate(pts):
            rows.append((phase, f"{phase} insight {i}", f"kind-{i // n_per}"))
            vectors.append(v)
    rng = np.random.default_rng(7)
    for j in range(4):
        far = rng.normal(size=24) * 3
        rows.append(("execution", f"execution odd one {j}", "odd"))
        vectors.append((far / np.linalg.norm(far)).astype(np.float32))
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, ?, ?, 1)",
            [(insight_id(p, t), p, t) for p, t, _ in rows],
        )
        conn.executemany(
            "INSERT INTO insight_sources (insight_id, source_key, origin, label) VALUES (?, ?, 'jsonl', ?)",
            [(insight_id(p, t), f"k{i}", label) for i, (p, t, label) in enumerate(rows)],
        )
        embedding_set = ensure_set(conn, "all-MiniLM-L6-v2", revision, "none", 24)
        write_vectors(conn, embedding_set, text_hashes([t for _, t, _ in rows]), np.stack(vectors))
    return store


def cluster_one(store, params: ClusterParams, extras: str = "now", **execution) -> ClusteringResult:
    """The one clustering of a run for one phase (or all phases), with execution-only fields set; the map and
    stability computed in the run unless `extras` is "later"."""
    (result,) = run_cluster(store, params.model_copy(update=execution), extras=extras).clusterings
    return result

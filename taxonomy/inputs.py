"""Reading what earlier stages wrote: clusterings, their members' texts, and the vectors of the embedding set each
clustering was made from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from failatlas.core.errors import InputError, NotFoundError
from failatlas.core.store import Store
from failatlas.embed import EmbeddingSet, get_set, vectors_of_texts


@dataclass
class ClusteringInput:
    """One clustering with its members: insight ids, phases, texts and cluster labels (-1 = outlier)."""

    id: str
    phase: str | None
    embedding_set: EmbeddingSet  # the vectors the clustering was made from
    members: pl.DataFrame  # insight_id, phase, text, cluster


def query_frame(store: Store, sql: str, params: Sequence[object] | None = None) -> pl.DataFrame:
    """Run a read query and return a polars DataFrame (through Arrow, so column types survive)."""
    with store.read() as conn:
        table = conn.sql(sql, params=list(params or [])).to_arrow_table()
    return pl.from_arrow(table)  # type: ignore[return-value]


def latest_clusterings(store: Store) -> list[str]:
    """The newest clustering of each phase (one cross-phase clustering counts as phase NULL)."""
    rows = store.query(
        "SELECT id FROM clusterings"
        " QUALIFY row_number() OVER (PARTITION BY phase ORDER BY created_at DESC, id) = 1"
        " ORDER BY phase NULLS LAST"
    )
    if not rows:
        raise NotFoundError("the store holds no clustering", hint="run `failatlas cluster run` first")
    return [r[0] for r in rows]


def load_clustering(store: Store, clustering_id: str) -> ClusteringInput:
    """A clustering, its embedding set and its members. Raises NotFoundError when it does not exist, has no
    members, or names no embedding set of this store (a clustering made before embedding sets whose vectors
    are gone: cluster again)."""
    head = store.query("SELECT phase, embedding_set_id FROM clusterings WHERE id = ?", [clustering_id])
    if not head:
        raise NotFoundError(
            f"no clustering '{clustering_id}'", hint="list them with `failatlas cluster list`"
        )
    phase, set_id = head[0]
    if set_id is None:
        raise NotFoundError(f"clustering '{clustering_id}' records no embedding set",
                            hint="its vectors are no longer in the store: run `failatlas cluster run` again")
    members = query_frame(
        store,
        "SELECT a.insight_id, i.phase, i.text, a.cluster FROM cluster_assignments a"
        " JOIN insights i ON i.id = a.insight_id WHERE a.clustering_id = ? ORDER BY a.insight_id",
        [clustering_id],
    )
    if members.height == 0:
        raise NotFoundError(f"clustering '{clustering_id}' has no assigned insights")
    return ClusteringInput(id=clustering_id, phase=phase, embedding_set=get_set(store, set_id), members=members)


def load_vectors(store: Store, texts: Sequence[str], embedding_set: EmbeddingSet) -> tuple[np.ndarray, np.ndarray]:
    """Unit-length vectors for `texts` from `embedding_set` (texts normalised as the set's normaliser did), as
    (matrix, found): rows of texts without a vector are zero and `found` is False there. Raises ConfigError for
    a normaliser this build does not know."""
    matrix, found = vectors_of_texts(store, embedding_set, texts)
    return normalise(matrix), found


def require_vectors(store: Store, texts: Sequence[str], embedding_set: EmbeddingSet, what: str) -> np.ndarray:
    """Like `load_vectors`, but raises InputError naming how many texts lack a vector."""
    matrix, found = load_vectors(store, texts, embedding_set)
    if not found.all():
        raise InputError(
            f"{int((~found).sum())} of {len(texts)} {what} have no embedding in set {embedding_set.id}"
            f" (model '{embedding_set.model}', normalisation '{embedding_set.normalisation}')",
            hint="run `failatlas embed` for them first, or pass vectors in",
        )
    return matrix


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)

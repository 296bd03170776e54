"""Reading what earlier stages wrote: clusterings, their members' texts, and embedding vectors by
text hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from failatlas.core.errors import ConfigError, InputError, NotFoundError
from failatlas.core.store import Store


def text_hash(text: str) -> str:
    """The key of a text in the `embeddings` table: sha256 of its UTF-8 bytes (after normalisation), hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_normaliser(name: str | None) -> Callable[[Sequence[str]], list[str]]:
    """The function that turned insight texts into the texts `embed` hashed and embedded, by the name
    stored in `embeddings.normalisation` (e.g. 'mask-v1'); 'none' or None leaves texts unchanged. Raises
    ConfigError for a name this build does not know."""
    if name in (None, "none"):
        return list
    try:
        from failatlas.embed import NORMALISERS
    except ImportError as exc:
        raise ConfigError(
            f"the embeddings were made with normaliser '{name}', but the embed package is missing",
            hint="install FailAtlas with its mining stages",
        ) from exc
    for factory in NORMALISERS.values():
        normaliser = factory()
        if normaliser.name == name:
            return normaliser
    raise ConfigError(f"unknown text normaliser '{name}'", hint="re-embed with a normaliser this build knows")


@dataclass
class ClusteringInput:
    """One clustering with its members: insight ids, phases, texts and cluster labels (-1 = outlier)."""

    id: str
    phase: str | None
    embed_model: str
    normalisation: str  # embeddings.normalisation of the clustered vectors ('none' when not recorded)
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
    """A clustering and its members. Raises NotFoundError when it does not exist or has no members."""
    head = store.query("SELECT phase, embed_model, params FROM clusterings WHERE id = ?", [clustering_id])
    if not head:
        raise NotFoundError(
            f"no clustering '{clustering_id}'", hint="list them with `failatlas cluster list`"
        )
    members = query_frame(
        store,
        "SELECT a.insight_id, i.phase, i.text, a.cluster FROM cluster_assignments a"
        " JOIN insights i ON i.id = a.insight_id WHERE a.clustering_id = ? ORDER BY a.insight_id",
        [clustering_id],
    )
    if members.height == 0:
        raise NotFoundError(f"clustering '{clustering_id}' has no assigned insights")
    params = json.loads(head[0][2]) if head[0][2] else {}
    normalisation = params.get("normalisation") if isinstance(params, dict) else None
    return ClusteringInput(
        id=clustering_id,
        phase=head[0][0],
        embed_model=head[0][1],
        normalisation=str(normalisation or "none"),
        members=members,
    )


def load_vectors(
    store: Store, texts: Sequence[str], model: str, normalisation: str = "none"
) -> tuple[np.ndarray, np.ndarray]:
    """Unit-length vectors for `texts` from the `embeddings` table (newest row per text for this model and
    normalisation), as (matrix, found): rows of texts without a vector are zero and `found` is False there."""
    hashes = [text_hash(t) for t in text_normaliser(normalisation)(texts)]
    rows = store.query(
        "SELECT text_hash, vector FROM embeddings"
        " WHERE model = ? AND normalisation = ? AND text_hash IN (SELECT unnest(?::VARCHAR[]))"
        " QUALIFY row_number() OVER (PARTITION BY text_hash ORDER BY created_at DESC, revision DESC) = 1",
        [model, normalisation, sorted(set(hashes))],
    )
    by_hash = {h: np.asarray(v, dtype=np.float32) for h, v in rows}
    if not by_hash:
        return np.zeros((len(texts), 0), dtype=np.float32), np.zeros(len(texts), dtype=bool)
    dim = len(next(iter(by_hash.values())))
    matrix = np.zeros((len(texts), dim), dtype=np.float32)
    found = np.zeros(len(texts), dtype=bool)
    for row, h in enumerate(hashes):
        vec = by_hash.get(h)
        if vec is not None:
            matrix[row] = vec
            found[row] = True
    return normalise(matrix), found


def require_vectors(
    store: Store, texts: Sequence[str], model: str, what: str, normalisation: str = "none"
) -> np.ndarray:
    """Like `load_vectors`, but raises InputError naming how many texts lack a vector."""
    matrix, found = load_vectors(store, texts, model, normalisation)
    if not found.all():
        raise InputError(
            f"{int((~found).sum())} of {len(texts)} {what} have no embedding under model '{model}'"
            f" (normalisation '{normalisation}')",
            hint="run `failatlas embed` for them first, or pass vectors in",
        )
    return matrix


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)

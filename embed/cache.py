"""The `embeddings` table as a content-addressed cache: bulk reads and writes keyed by
(text hash, model, revision, normalisation). Vectors travel as Arrow arrays, never row by row."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class CacheKey:
    """What, besides the text, decides a vector."""

    model: str
    revision: str
    normalisation: str


def text_hash(text: str) -> str:
    """sha256 hex digest of the text as embedded (after normalisation)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_hashes(texts: Iterable[str]) -> list[str]:
    return [text_hash(t) for t in texts]


def _hash_table(hashes: Sequence[str]) -> pa.Table:
    return pa.table({"pos": pa.array(np.arange(len(hashes), dtype=np.int64)), "text_hash": pa.array(hashes)})


def cached_hashes(conn: duckdb.DuckDBPyConnection, hashes: Sequence[str], key: CacheKey) -> set[str]:
    """Which of `hashes` already have a vector under `key`."""
    if not hashes:
        return set()
    wanted = _hash_table(hashes)  # noqa: F841 - read by the query below through DuckDB's replacement scan
    rows = conn.execute(
        "SELECT DISTINCT w.text_hash FROM wanted w JOIN embeddings e ON e.text_hash = w.text_hash"
        " AND e.model = ? AND e.revision = ? AND e.normalisation = ?",
        [key.model, key.revision, key.normalisation],
    ).fetchall()
    return {r[0] for r in rows}


def write_vectors(
    conn: duckdb.DuckDBPyConnection, hashes: Sequence[str], vectors: np.ndarray, key: CacheKey
) -> int:
    """Insert vectors for `hashes` (rows already cached are left alone); returns the number offered."""
    if len(hashes) == 0:
        return 0
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape
    if n != len(hashes):
        raise ValueError(f"{len(hashes)} hashes but {n} vectors")
    offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
    new_rows = pa.table(  # noqa: F841 - read by the INSERT below through a replacement scan
        {  # noqa: F841 - read by the query below through DuckDB's replacement scan
            "text_hash": pa.array(hashes),
            "vector": pa.ListArray.from_arrays(offsets, pa.array(vectors.ravel())),
        }
    )
    conn.execute(
        "INSERT INTO embeddings (text_hash, model, revision, normalisation, dim, vector)"
        " SELECT text_hash, ?, ?, ?, ?, vector::FLOAT[] FROM new_rows ON CONFLICT DO NOTHING",
        [key.model, key.revision, key.normalisation, dim],
    )
    return n


def read_vectors(conn: duckdb.DuckDBPyConnection, hashes: Sequence[str], key: CacheKey) -> np.ndarray:
    """An (len(hashes), dim) float32 array in the order of `hashes`.

    Raises KeyError naming how many are missing."""
    if not hashes:
        return np.zeros((0, 0), dtype=np.float32)
    wanted = _hash_table(hashes)  # noqa: F841 - read by the query below through DuckDB's replacement scan
    table = conn.sql(
        "SELECT w.pos, e.dim, e.vector FROM wanted w JOIN embeddings e ON e.text_hash = w.text_hash"
        " AND e.model = ? AND e.revision = ? AND e.normalisation = ? ORDER BY w.pos",
        params=[key.model, key.revision, key.normalisation],
    ).to_arrow_table()
    if table.num_rows != len(hashes):
        raise KeyError(f"{len(hashes) - table.num_rows} of {len(hashes)} texts have no cached vector")
    if table.num_rows == 0:
        return np.zeros((0, 0), dtype=np.float32)
    dim = int(table.column("dim")[0].as_py())
    flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(table.num_rows, dim)

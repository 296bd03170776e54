"""Embedding sets: which model, revision and normaliser made a group of vectors, and reading vectors of a set.

A set is one (model, revision, normalisation); its id is a hash of the three, so the same set has the same id in
every store. Its vectors live in the table `embedding_sets.vectors_table` names (`embedding_vectors_<dim>`, a
`FLOAT[dim]` column; see embed/schema.py), keyed by (set id, text hash). Readers join on the set id, never on
"the newest revision" of a model.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from failatlas.core.errors import NotFoundError
from failatlas.core.store import Store


class EmbeddingSet(BaseModel):
    """One row of `embedding_sets`."""

    id: str
    model: str
    revision: str
    normalisation: str
    dim: int
    vectors_table: str
    created_at: dt.datetime | None = None


def set_id(model: str, revision: str, normalisation: str) -> str:
    """The id of the set of (model, revision, normalisation): 'es-' + 12 hex digits of sha256 of the three joined
    by U+001F (the same recipe as embed's migration 2, which named the sets of older stores)."""
    key = f"{model}\x1f{revision}\x1f{normalisation}"
    return "es-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def vectors_table_name(dim: int) -> str:
    """The table that holds vectors of `dim` dimensions."""
    return f"embedding_vectors_{int(dim)}"


_COLUMNS = "id, model, revision, normalisation, dim, vectors_table, created_at"


def _to_set(row: tuple) -> EmbeddingSet:
    return EmbeddingSet(**dict(zip(_COLUMNS.split(", "), row, strict=True)))


def find_set(conn: duckdb.DuckDBPyConnection, model: str, revision: str, normalisation: str) -> EmbeddingSet | None:
    """The set of (model, revision, normalisation), or None when nothing was embedded with it yet."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM embedding_sets WHERE id = ?", [set_id(model, revision, normalisation)]
    ).fetchall()
    return _to_set(rows[0]) if rows else None


def get_set(store: Store, embedding_set_id: str) -> EmbeddingSet:
    """The set `embedding_set_id`. Raises NotFoundError when the store has no such set."""
    with store.read() as conn:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM embedding_sets WHERE id = ?", [embedding_set_id]).fetchall()
    if not rows:
        raise NotFoundError(f"no embedding set '{embedding_set_id}'", hint="run `failatlas embed run` first")
    return _to_set(rows[0])


def set_provenance(store: Store, embedding_set_id: str) -> dict | None:
    """What the tuned model of a set was made from (`failatlas embed tune`'s record, kept when the set's first
    vectors were written), or None for a set of any other model."""
    with store.read() as conn:
        rows = conn.execute("SELECT provenance FROM embedding_set_provenance WHERE set_id = ?",
                            [embedding_set_id]).fetchall()
    return json.loads(rows[0][0]) if rows else None


def list_sets(store: Store) -> list[EmbeddingSet]:
    """Every embedding set, oldest first."""
    with store.read() as conn:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM embedding_sets ORDER BY created_at, id").fetchall()
    return [_to_set(r) for r in rows]


def _hash_table(hashes: Sequence[str]) -> pa.Table:
    return pa.table({"pos": pa.array(np.arange(len(hashes), dtype=np.int64)), "text_hash": pa.array(hashes)})


def cached_hashes(
    conn: duckdb.DuckDBPyConnection, embedding_set: EmbeddingSet | None, hashes: Sequence[str]
) -> set[str]:
    """Which of `hashes` already have a vector in `embedding_set` (none when the set does not exist yet)."""
    if embedding_set is None or not hashes:
        return set()
    conn.register("wanted_hashes", _hash_table(hashes))
    try:
        rows = conn.execute(
            f'SELECT DISTINCT w.text_hash FROM wanted_hashes w JOIN "{embedding_set.vectors_table}" v'
            " ON v.text_hash = w.text_hash AND v.set_id = ?",
            [embedding_set.id],
        ).fetchall()
    finally:
        conn.unregister("wanted_hashes")
    return {r[0] for r in rows}


def read_vectors(
    conn: duckdb.DuckDBPyConnection, embedding_set: EmbeddingSet, hashes: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, found): a (len(hashes), dim) float32 array in the order of `hashes`, zero rows where a text has
    no vector in the set, and the boolean mask of the rows that have one."""
    matrix = np.zeros((len(hashes), embedding_set.dim), dtype=np.float32)
    found = np.zeros(len(hashes), dtype=bool)
    if not hashes:
        return matrix, found
    conn.register("wanted_hashes", _hash_table(hashes))
    try:
        table = conn.sql(
            f'SELECT w.pos, v.vector FROM wanted_hashes w JOIN "{embedding_set.vectors_table}" v'
            " ON v.text_hash = w.text_hash AND v.set_id = ?"
            " QUALIFY row_number() OVER (PARTITION BY w.pos) = 1 ORDER BY w.pos",
            params=[embedding_set.id],
        ).to_arrow_table()
    finally:
        conn.unregister("wanted_hashes")
    if table.num_rows:
        pos = table.column("pos").to_numpy()
        flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        matrix[pos] = np.asarray(flat, dtype=np.float32).reshape(table.num_rows, embedding_set.dim)
        found[pos] = True
    return matrix, found

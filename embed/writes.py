"""Every write of the embed stage: registering an embedding set and appending its vectors.

Vectors travel as one Arrow FixedSizeList column per chunk into a `FLOAT[dim]` column, never row by row. The
stage appends its chunks on one held write connection (`VectorWriter`), one transaction per chunk: opening a
connection per chunk made DuckDB checkpoint, and rewrite the table's last row group, at every close
(benchmarks/vector_writes.py measures both).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from types import TracebackType

import duckdb
import numpy as np
import pyarrow as pa

from failatlas.core.store import Store
from failatlas.embed.models import model_provenance
from failatlas.embed.sets import EmbeddingSet, find_set, set_id, vectors_table_name


def ensure_set(
    conn: duckdb.DuckDBPyConnection, model: str, revision: str, normalisation: str, dim: int
) -> EmbeddingSet:
    """The set of (model, revision, normalisation), registered (and its dimension's vectors table created) when it
    is new. Raises ValueError when the set exists with another dimension."""
    known = find_set(conn, model, revision, normalisation)
    if known is not None:
        if known.dim != dim:
            raise ValueError(f"embedding set {known.id} holds {known.dim}-d vectors, not {dim}-d")
        return known
    table = vectors_table_name(dim)
    conn.execute(
        f'CREATE TABLE IF NOT EXISTS "{table}" (set_id VARCHAR NOT NULL, text_hash VARCHAR NOT NULL,'
        f" vector FLOAT[{int(dim)}] NOT NULL)"
    )
    conn.execute(
        "INSERT INTO embedding_sets (id, model, revision, normalisation, dim, vectors_table) VALUES (?, ?, ?, ?, ?, ?)",
        [set_id(model, revision, normalisation), model, revision, normalisation, int(dim), table],
    )
    provenance = model_provenance(model)
    if provenance is not None:  # a model `failatlas embed tune` made: what it was tuned from, kept with its set
        conn.execute("INSERT INTO embedding_set_provenance (set_id, provenance) VALUES (?, ?)",
                     [set_id(model, revision, normalisation), json.dumps(provenance, sort_keys=True)])
    found = find_set(conn, model, revision, normalisation)
    assert found is not None
    return found


def vector_rows(hashes: Sequence[str], vectors: np.ndarray) -> pa.Table:
    """(text_hash, vector) as Arrow, the vectors a FixedSizeList over one contiguous float32 buffer."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(hashes):
        raise ValueError(f"{len(hashes)} hashes but vectors of shape {vectors.shape}")
    flat = pa.array(vectors.reshape(-1))
    return pa.table({
        "text_hash": pa.array(list(hashes), type=pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
    })


def write_vectors(
    conn: duckdb.DuckDBPyConnection, embedding_set: EmbeddingSet, hashes: Sequence[str], vectors: np.ndarray
) -> int:
    """Append the vectors of `hashes` to the set; returns the number written. The caller offers only texts the
    set lacks (the stage asks `cached_hashes` first): the table has no key to check, because checking each chunk
    against every vector of the set cost a third of the write. Two runs racing on one set may store a text
    twice; `drop_duplicates`, run when a writer finishes, keeps one row per text."""
    if len(hashes) == 0:
        return 0
    conn.register("new_vectors", vector_rows(hashes, vectors))
    try:
        conn.execute(
            f'INSERT INTO "{embedding_set.vectors_table}" (set_id, text_hash, vector)'
            " SELECT ?, text_hash, vector FROM new_vectors",
            [embedding_set.id],
        )
    finally:
        conn.unregister("new_vectors")
    return len(hashes)


def drop_duplicates(conn: duckdb.DuckDBPyConnection, embedding_set: EmbeddingSet) -> int:
    """Keep one row per text of the set (the first stored); returns the rows removed. A count decides whether
    there is anything to do, so the usual case (none) costs one scan of the set's hashes."""
    table = embedding_set.vectors_table
    extra = conn.execute(
        f'SELECT count(*) - count(DISTINCT text_hash) FROM "{table}" WHERE set_id = ?', [embedding_set.id]
    ).fetchone()[0]
    if not extra:
        return 0
    conn.execute(
        f'DELETE FROM "{table}" WHERE rowid IN (SELECT rowid FROM (SELECT rowid, row_number() OVER'
        f' (PARTITION BY text_hash ORDER BY rowid) AS k FROM "{table}" WHERE set_id = ?) WHERE k > 1)',
        [embedding_set.id],
    )
    return int(extra)


class VectorWriter:
    """Appends chunks of one set's vectors, committing each chunk as it is written (an interrupted run keeps every
    finished chunk). With `hold` (the stage's choice on a GPU, where chunks come faster than a connection per chunk
    can store them) one write connection is held across chunks, released and taken again after `max_hold_s`
    seconds so that other processes (the app) wait at most about that long; without it each chunk opens its own.
    On a normal exit, duplicates that a concurrent run of the same set may have stored are dropped. Use from one
    thread, as a context manager."""

    def __init__(self, store: Store, embedding_set: EmbeddingSet, *, hold: bool = True,
                 max_hold_s: float = 5.0) -> None:
        self.store = store
        self.embedding_set = embedding_set
        self.hold = hold
        self.max_hold_s = max_hold_s
        self.written = 0
        self.duplicates_dropped = 0
        self._cm = None
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._held_since = 0.0

    def __enter__(self) -> VectorWriter:
        if self.hold:
            self._open()
        return self

    def _open(self) -> None:
        self._held_since = time.monotonic()
        self._cm = self.store.write()
        self._conn = self._cm.__enter__()
        # Measured with benchmarks/vector_writes.py: float32 embeddings barely compress (about 14%) and compressing
        # them at the checkpoint took longer than writing them; a checkpoint at every 16 MB of WAL rewrote the
        # table's unfinished row group once per chunk; one DuckDB thread beside the encoder halved the insert
        # on 2 cores. The checkpoint happens once, when the connection closes: on an H100, checkpointing after each
        # chunk, or once at 60% or 75% of the vectors, in the writer's thread, made the stage 3-6% slower.
        for setting in ("force_compression = 'uncompressed'", "checkpoint_threshold = '1GB'", "threads = 1"):
            self._conn.execute(f"SET {setting}")

    def write(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Append and commit one chunk."""
        if not self.hold:
            with self.store.write() as conn:
                write_vectors(conn, self.embedding_set, hashes, vectors)
            self.written += len(hashes)
            return
        if self._conn is None:
            self._open()  # released while waiting for this chunk
        write_vectors(self._conn, self.embedding_set, hashes, vectors)
        self._conn.execute("COMMIT")
        self._conn.execute("BEGIN TRANSACTION")
        self.written += len(hashes)
        self.release_if_due()

    def release_if_due(self) -> None:
        """Give the store back when the connection has been held for `max_hold_s`; the next write takes it again.
        Called after each chunk and while waiting for the next one, so other processes wait about that long."""
        if self._conn is not None and time.monotonic() - self._held_since > self.max_hold_s:
            self._close(None, None, None)

    def _close(self, exc_type: type[BaseException] | None, exc: BaseException | None,
               tb: TracebackType | None) -> bool | None:
        cm, self._cm, self._conn = self._cm, None, None
        return None if cm is None else cm.__exit__(exc_type, exc, tb)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        if exc_type is None:
            if self._conn is not None:
                self.duplicates_dropped = drop_duplicates(self._conn, self.embedding_set)
            else:
                with self.store.write() as conn:
                    self.duplicates_dropped = drop_duplicates(conn, self.embedding_set)
        return self._close(exc_type, exc, tb)

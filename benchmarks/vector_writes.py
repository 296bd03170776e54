"""Vector writes into a real DuckDB file: the old `embeddings` table (FLOAT[] lists) against embedding sets
(FLOAT[dim] arrays), each as the embed stage writes them.

    python benchmarks/vector_writes.py [--n 100000] [--dim 384] [--chunk 16384]

Writes `n` synthetic unit vectors with their text hashes into fresh store files, in chunks of `chunk` rows (the
stage's chunk on a GPU), three ways:
- old: the `embeddings` table of embed's migration 1; each chunk a ListArray cast to FLOAT[], `ON CONFLICT DO
  NOTHING` on its primary key, one `store.write()` (a connection, a transaction, a checkpoint at close) per chunk,
  as the old embed/cache.py and embed/stage.py did;
- new, connection per chunk: the set's `embedding_vectors_<dim>` table, an Arrow FixedSizeList per chunk
  (embed/writes.py's `write_vectors`), one `store.write()` per chunk;
- new: the same through `VectorWriter`, the stage's path: one held connection, one transaction per chunk.
Prints rows/s of each and the ratios to the old way; the time includes registering the set, commits and the
final checkpoint (closing the connection).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first


def old_way(path: Path, hashes: list[str], vectors: np.ndarray, chunk: int) -> float:
    from failatlas.core.store import Store
    from failatlas.embed.schema import MIGRATIONS

    store = Store(path)
    store.migrate([m for m in MIGRATIONS if m.version == 1])
    start = time.perf_counter()
    for lo in range(0, len(hashes), chunk):
        part = np.ascontiguousarray(vectors[lo : lo + chunk], dtype=np.float32)
        n, dim = part.shape
        offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
        rows = pa.table({"text_hash": pa.array(hashes[lo : lo + chunk]),
                         "vector": pa.ListArray.from_arrays(offsets, pa.array(part.ravel()))})
        with store.write() as conn:
            conn.register("new_rows", rows)
            conn.execute(
                "INSERT INTO embeddings (text_hash, model, revision, normalisation, dim, vector)"
                " SELECT text_hash, ?, ?, ?, ?, vector::FLOAT[] FROM new_rows ON CONFLICT DO NOTHING",
                ["all-MiniLM-L6-v2", "bench", "none", dim],
            )
            conn.unregister("new_rows")
    seconds = time.perf_counter() - start
    assert store.query("SELECT count(*) FROM embeddings")[0][0] == len(hashes)
    return seconds


def new_way(path: Path, hashes: list[str], vectors: np.ndarray, chunk: int, *, held: bool) -> float:
    from failatlas.embed.writes import VectorWriter, ensure_set, write_vectors
    from failatlas.store import open_store

    store = open_store(path)
    start = time.perf_counter()
    with store.write() as conn:
        embedding_set = ensure_set(conn, "all-MiniLM-L6-v2", "bench", "none", vectors.shape[1])
    if held:
        with VectorWriter(store, embedding_set) as writer:
            for lo in range(0, len(hashes), chunk):
                writer.write(hashes[lo : lo + chunk], vectors[lo : lo + chunk])
    else:
        for lo in range(0, len(hashes), chunk):
            with store.write() as conn:
                write_vectors(conn, embedding_set, hashes[lo : lo + chunk], vectors[lo : lo + chunk])
    seconds = time.perf_counter() - start
    stored = store.query(f"SELECT count(*) FROM {embedding_set.vectors_table}")[0][0]
    assert stored == len(hashes), stored
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--chunk", type=int, default=16_384)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, args.dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    hashes = [hashlib.sha256(f"statement {i}".encode()).hexdigest() for i in range(args.n)]
    with tempfile.TemporaryDirectory(prefix="vector_writes_") as tmp:
        rows = {
            "old (FLOAT[] lists, connection per chunk)": old_way(Path(tmp) / "old.duckdb", hashes, vectors,
                                                                  args.chunk),
            "new, connection per chunk (FLOAT[dim])": new_way(Path(tmp) / "new_each.duckdb", hashes, vectors,
                                                               args.chunk, held=False),
            "new (FLOAT[dim], VectorWriter as the stage)": new_way(Path(tmp) / "new.duckdb", hashes, vectors,
                                                                   args.chunk, held=True),
        }
    old = next(iter(rows.values()))
    print(f"{args.n:,} vectors of {args.dim} dimensions, chunks of {args.chunk:,}")
    for name, seconds in rows.items():
        print(f"  {name:46s} {seconds:6.2f} s  {args.n / seconds:>9,.0f} rows/s  x{old / seconds:.2f}")


if __name__ == "__main__":
    main()

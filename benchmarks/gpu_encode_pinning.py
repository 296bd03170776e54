"""Pinned or plain host memory for the encoder's batches, on a GPU: the encoder alone and the embed stage end to end.

    HF_HUB_OFFLINE=1 python benchmarks/gpu_encode_pinning.py [--n 100000]

Runs, alternating, the fast encode path over `n` statements in the stage's chunks (16,384, batch 1,024) with each
batch's tensors pinned (`pin_memory()`, as before 2026-11-26) and without (the default now), then the whole embed
stage on fresh stores the same two ways. Prints texts/s of each.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    args = ap.parse_args()
    import pyarrow as pa
    from gpu_embed import statements

    import failatlas.embed.fast_encode as fe
    from failatlas.embed import EmbedParams, get_embedder, run
    from failatlas.store import open_store

    texts = statements(args.n)
    plain = fe.FastEncoder._tokenised_batches

    def pinned(self, texts, order, batch_size, _pin):  # noqa: ANN001, ANN202
        return plain(self, texts, order, batch_size, True)

    embedder = get_embedder("all-MiniLM-L6-v2", device="cuda")
    embedder.encode(texts[:2048], batch_size=1024)
    for label in ("pinned", "plain", "pinned", "plain"):
        fe.FastEncoder._tokenised_batches = pinned if label == "pinned" else plain
        start = time.perf_counter()
        for lo in range(0, len(texts), 16_384):
            embedder.encode(texts[lo : lo + 16_384], batch_size=1024)
        print(f"encoder only, {label}: {len(texts) / (time.perf_counter() - start):,.0f}/s", flush=True)
    rows = pa.table({"id": [hashlib.sha256(t.encode()).hexdigest()[:16] for t in texts], "text": texts})  # noqa: F841
    for label in ("pinned", "plain", "pinned", "plain"):
        fe.FastEncoder._tokenised_batches = pinned if label == "pinned" else plain
        store = open_store(Path(tempfile.mkdtemp()) / "stage.duckdb")
        with store.write() as conn:
            conn.execute("INSERT INTO insights (id, phase, text, n_occurrences)"
                         " SELECT id, 'execution', text, 1 FROM rows")
        start = time.perf_counter()
        result = run(store, EmbedParams(device="cuda"))
        seconds = time.perf_counter() - start
        print(f"embed stage, {label}: {result.n_new:,} texts in {seconds:.2f} s = {result.n_new / seconds:,.0f}/s",
              flush=True)


if __name__ == "__main__":
    main()

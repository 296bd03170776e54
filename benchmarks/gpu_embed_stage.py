"""The embed stage end to end on a GPU: `failatlas.embed.run` over a store of distinct statements, writes included.

    python benchmarks/gpu_embed_stage.py [--n 100000] [--device cuda]

Fills a fresh store with `n` distinct short statements (benchmarks/gpu_embed.py's generator) as insights and runs
`failatlas.embed.run` with the default model (all-MiniLM-L6-v2 from its package, fp32) twice, each on its own fresh
store: with the stage's defaults (batch 1,024 and chunks of 16,384 on a GPU, vectors written by a second thread)
and with the defaults it had before (batch 64, chunks of 4,096, written in line: emulated by the batch size and
chunk constants, the writer thread kept). Each stage call loads the model itself, as a user's run does; the
time of one such load (measured alone before) is also subtracted to give the stage's throughput. Prints texts/s
of each and their ratio; writes embed_stage.json into $OUT when set.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first
sys.path.insert(0, str(ROOT / "benchmarks"))


def fill(path: Path, texts: list[str]):  # noqa: ANN201
    from failatlas.store import open_store

    store = open_store(path)
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, 'execution', ?, 1)",
            [(hashlib.sha256(t.encode()).hexdigest()[:16], t) for t in texts],
        )
    return store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    from gpu_embed import statements

    import failatlas.embed.stage as stage
    from failatlas.embed.models import get_embedder

    texts = list(dict.fromkeys(statements(args.n + args.n // 10)))[: args.n]
    get_embedder(device=args.device).encode(texts[:256])  # first load: imports, CUDA context, file cache
    start = time.perf_counter()
    get_embedder(device=args.device).encode(texts[:256])
    load = time.perf_counter() - start  # what each stage call pays to load the model again
    print(f"model load + 256 texts: {load:.2f} s", flush=True)
    configs = {
        "stage defaults (batch 1024, chunks 16,384)": {},
        "before (batch 64, chunks 4,096)": {"batch_size": 64, "chunk": 4096},
    }
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, cfg) in enumerate(configs.items()):
            store = fill(Path(tmp) / f"s{i}.duckdb", texts)
            saved = stage.WRITE_CHUNK_GPU
            stage.WRITE_CHUNK_GPU = cfg.get("chunk", saved)
            try:
                start = time.perf_counter()
                report = stage.run(store, stage.EmbedParams(device=args.device, batch_size=cfg.get("batch_size")))
                seconds = time.perf_counter() - start
            finally:
                stage.WRITE_CHUNK_GPU = saved
            assert report.n_new == len(texts)
            stored = store.query(
                "SELECT count(*) FROM embedding_vectors_384 WHERE set_id = ?", [report.embedding_set_id]
            )[0][0]
            rows[name] = {"seconds": seconds, "texts_per_s": len(texts) / seconds, "stored": stored,
                          "device": report.device, "texts_per_s_without_load": len(texts) / (seconds - load)}
            print(f"{name}: {len(texts):,} texts in {seconds:.2f} s = {len(texts) / seconds:,.0f}/s, "
                  f"{len(texts) / (seconds - load):,.0f}/s without one model load "
                  f"({stored:,} vectors stored, device {report.device})", flush=True)
    names = list(rows)
    ratio = rows[names[0]]["texts_per_s"] / rows[names[1]]["texts_per_s"]
    print(f"ratio defaults / before: {ratio:.2f}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "embed_stage.json").write_text(json.dumps({"n": len(texts), "rows": rows,
                                                                            "ratio": ratio}, indent=1))


if __name__ == "__main__":
    main()

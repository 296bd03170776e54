"""The embed stage end to end on a GPU: `failatlas.embed.run` over a store of distinct statements, writes included.

    python benchmarks/gpu_embed_stage.py [--n 100000] [--device cuda] [--repeats 3]

Fills a fresh store with `n` distinct short statements (benchmarks/gpu_embed.py's generator) as insights and runs
`failatlas.embed.run` with the default model (all-MiniLM-L6-v2 from its package, fp32), each run on its own fresh
store, alternating the stage's defaults (batch 1,024, chunks of 16,384 on a GPU) with the defaults it had before
(batch 64, chunks of 4,096). Each stage call loads the model itself, as a user's run does (the model's files are
in the OS cache after a first load, done before the timed runs). Prints texts/s of every run, the median of each
and their ratio; writes embed_stage.json into $OUT when set. To compare with older code, run that commit's own
copy of this script in the same session (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first
sys.path.insert(0, str(ROOT / "benchmarks"))


def fill(path: Path, texts: list[str]):  # noqa: ANN201
    import pyarrow as pa

    from failatlas.store import open_store

    store = open_store(path)
    rows = pa.table({"id": [hashlib.sha256(t.encode()).hexdigest()[:16] for t in texts], "text": texts})
    with store.write() as conn:
        conn.register("rows", rows)
        conn.execute("INSERT INTO insights (id, phase, text, n_occurrences) SELECT id, 'execution', text, 1 FROM rows")
    return store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from gpu_embed import statements

    import failatlas.embed.stage as stage
    from failatlas.embed.models import get_embedder

    texts = list(dict.fromkeys(statements(args.n + args.n // 10)))[: args.n]
    get_embedder(device=args.device).encode(texts[:256])  # first load: imports, CUDA context, file cache
    configs = {
        "stage defaults (batch 1024, chunks 16,384)": {},
        "before (batch 64, chunks 4,096)": {"batch_size": 64, "chunk": 4096},
    }
    rows: dict[str, list[float]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for i, (name, cfg) in enumerate(configs.items()):
                store = fill(Path(tmp) / f"s{repeat}-{i}.duckdb", texts)
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
                assert stored == len(texts)
                size = Path(store.path).stat().st_size
                rows[name].append(len(texts) / seconds)
                print(f"{name}: {len(texts):,} texts in {seconds:.2f} s = {len(texts) / seconds:,.0f}/s "
                      f"({stored:,} vectors stored, file {size / 1e6:.0f} MB, device {report.device})", flush=True)
    medians = {name: statistics.median(v) for name, v in rows.items()}
    names = list(rows)
    ratio = medians[names[0]] / medians[names[1]]
    for name, value in medians.items():
        print(f"median {name}: {value:,.0f}/s")
    print(f"ratio {names[0]} / {names[1]}: {ratio:.2f}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "embed_stage.json").write_text(json.dumps({"n": len(texts), "rows": rows,
                                                                            "medians": medians, "ratio": ratio},
                                                                           indent=1))


if __name__ == "__main__":
    main()

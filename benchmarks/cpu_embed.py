"""CPU embedding throughput of the default model: sentence-transformers' own encode vs FailAtlas's paths.

    python benchmarks/cpu_embed.py [--n 3000] [--repeats 3] [--batch-size 64]

`n` distinct statements of the mining corpus (benchmarks/corpus.py), all-MiniLM-L6-v2 from its package, on the
CPU; paths interleaved per repeat: `SentenceTransformer.encode` (what BERTopic and a plain script use) and
FailAtlas's embedder (the Rust tokenizer ahead of the model, embed/fast_encode.py). Prints texts/s (median,
min-max), the ratio to the plain encode and the largest difference of the vectors.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()

    import numpy as np
    from corpus import generate

    from failatlas.embed.models import get_embedder

    texts = list(dict.fromkeys(generate(args.n * 3, 0)[0]))[: args.n]
    paths = {
        "sentence-transformers encode": get_embedder(device="cpu", fast=False),
        "FailAtlas embedder (fast tokenizer path)": get_embedder(device="cpu"),
    }
    vectors, rates = {}, {name: [] for name in paths}
    for embedder in paths.values():
        embedder.encode(texts[:64], batch_size=args.batch_size)  # load and warm up
    for _ in range(args.repeats):
        for name, embedder in paths.items():
            start = time.perf_counter()
            vectors[name] = embedder.encode(texts, batch_size=args.batch_size)
            rates[name].append(len(texts) / (time.perf_counter() - start))
    base = statistics.median(rates["sentence-transformers encode"])
    reference = vectors["sentence-transformers encode"]
    print(f"\n{len(texts)} distinct statements, batch size {args.batch_size}, {args.repeats} repeats, interleaved\n")
    print("| path | texts/s, median (min-max) | vs encode | max abs vector difference |")
    print("|---|---|---|---|")
    for name, xs in rates.items():
        print(f"| {name} | {statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f}) | "
              f"{statistics.median(xs) / base:.2f}x | {np.abs(vectors[name] - reference).max():.1e} |")


if __name__ == "__main__":
    main()

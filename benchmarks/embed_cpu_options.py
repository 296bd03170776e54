"""CPU embedding options side by side on the mining corpus: batch size, fp32 vs int8 dynamic quantisation vs bf16.

    python benchmarks/embed_cpu_options.py --n 10000 [--batch-sizes 16,32,64,128] [--repeats 2]

Encodes the distinct statements of `benchmarks/corpus.py` (as the embed stage does: each distinct text once) with
the packaged all-MiniLM-L6-v2 through FailAtlas's embedder on the CPU, in one process, the variants interleaved
per repeat so that a loaded machine slows them alike. Prints texts/s per variant, the ratio to fp32 at the
stage's batch size, and how far each variant's vectors are from fp32's (cosine between the two vectors of the
same text: mean and minimum; and the share of texts whose nearest neighbour changes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def nearest(vectors: np.ndarray) -> np.ndarray:
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -2.0)
    return sims.argmax(axis=1)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-sizes", default="16,32,64,128")
    ap.add_argument("--precisions", default="fp32,int8,bf16")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)

    import torch
    from corpus import generate

    from failatlas.embed.models import get_embedder

    texts = sorted(set(generate(args.n, args.seed)[0]))
    embedders = {}
    for precision in args.precisions.split(","):
        embedders[precision] = get_embedder(device="cpu", precision=precision).load()
    print(f"{len(texts)} distinct texts of {args.n}; torch {torch.__version__}, {torch.get_num_threads()} threads",
          file=sys.stderr)
    rates: dict[tuple[str, int], list[float]] = {}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for batch in map(int, args.batch_sizes.split(",")):
            for precision, embedder in embedders.items():
                tick = time.perf_counter()
                out = embedder.encode(texts, batch)
                rates.setdefault((precision, batch), []).append(len(texts) / (time.perf_counter() - tick))
                vectors[precision] = out
    base = statistics.median(rates.get(("fp32", 64), [float("nan")]))
    print("| precision | batch | texts/s (median) | / fp32 at 64 |")
    print("|---|---|---|---|")
    for (precision, batch), values in rates.items():
        med = statistics.median(values)
        print(f"| {precision} | {batch} | {med:.0f} ({min(values):.0f}-{max(values):.0f}) | {med / base:.2f} |")
    if "fp32" in vectors:
        ref = vectors["fp32"]
        ref_nn = nearest(ref)
        print("\n| precision | cosine to fp32, mean | min | nearest neighbour changed |")
        print("|---|---|---|---|")
        for precision, v in vectors.items():
            cos = (v * ref).sum(axis=1)
            changed = float((nearest(v) != ref_nn).mean())
            print(f"| {precision} | {cos.mean():.5f} | {cos.min():.5f} | {changed:.1%} |")


if __name__ == "__main__":
    main()

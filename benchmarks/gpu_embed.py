"""GPU embedding throughput of a sentence-transformers model on short failure statements.

    python benchmarks/gpu_embed.py --model DIR [--n 100000] [--batch-sizes 256,512,...,8192] [--dtypes fp32,fp16]

Standalone: needs torch, sentence-transformers and a model folder (e.g. one written by
benchmarks/pack_model_fp16.py). For each dtype and batch size it times `SentenceTransformer.encode` of `n`
synthetic short statements end to end (tokenising included, vectors normalised and copied back to the host),
median of `--repeats`. Then, at the best batch size, it splits that time: tokenising alone (CPU) and the pure
forward pass on pre-tokenised, length-sorted batches (GPU), and estimates how far the forward pass is from the
card's peak: FLOPs per sentence (2 x non-embedding parameters per real token plus attention) x throughput vs
the peak of the card (dense tensor-core fp16 / tf32 peak from a small table, or --peak-tflops).
Prints Markdown tables; writes gpu_embed.json into $OUT when it is set.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

# dense peak TFLOPs (fp16/bf16 tensor core, tf32 tensor core, fp32 CUDA core) by device-name substring
PEAKS = {
    "H200": (989.0, 494.0, 67.0),
    "H100 PCIe": (756.0, 378.0, 51.0),
    "H100": (989.0, 494.0, 67.0),
    "A100": (312.0, 156.0, 19.5),
    "L40S": (362.0, 183.0, 91.6),
    "L4": (121.0, 60.0, 30.3),
}

WORDS = [
    "model",
    "train",
    "data",
    "loss",
    "error",
    "file",
    "module",
    "import",
    "failed",
    "missing",
    "CUDA",
    "memory",
    "batch",
    "shape",
    "tensor",
    "timeout",
    "metric",
    "baseline",
    "seed",
    "dataset",
    "GPU",
    "epoch",
    "accuracy",
    "config",
    "path",
    "agent",
    "tool",
    "result",
    "test",
    "split",
    "gradient",
    "NaN",
    "learning",
    "rate",
    "layer",
    "output",
    "evaluation",
    "run",
    "script",
    "checkpoint",
    "version",
]


def statements(n: int, seed: int = 0) -> list[str]:
    """Short failure-like statements of 6-30 words (median ~15), like the insights FailAtlas embeds."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 30))) for _ in range(n)]


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def time_encode(st, texts: list[str], bs: int, repeats: int) -> list[float]:  # noqa: ANN001
    out = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        st.encode(texts, batch_size=bs, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        sync()
        out.append(time.perf_counter() - t)
    return out


def forward_only(st, texts: list[str], bs: int, repeats: int) -> dict:  # noqa: ANN001
    """Tokenise once (timed on its own), then time only the model's forward over the sorted batches."""
    import torch

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    t = time.perf_counter()
    batches = [st.tokenize([texts[i] for i in order[lo : lo + bs]]) for lo in range(0, len(texts), bs)]
    tokenise_s = time.perf_counter() - t
    real_tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    padded_tokens = sum(int(b["attention_mask"].numel()) for b in batches)
    dev = [{k: v.to(st.device) if isinstance(v, torch.Tensor) else v for k, v in b.items()} for b in batches]
    times = []
    with torch.inference_mode():
        for _ in range(repeats):
            sync()
            t = time.perf_counter()
            for b in dev:
                st.forward(dict(b))
            sync()
            times.append(time.perf_counter() - t)
    return {
        "tokenise_s": tokenise_s,
        "forward_s": statistics.median(times),
        "real_tokens": real_tokens,
        "padded_tokens": padded_tokens,
    }


def flops_per_token(st, seq: float) -> float:  # noqa: ANN001
    """2 x (non-embedding parameters) + attention scores and mixing (4 x layers x seq x hidden)."""
    cfg = st[0].auto_model.config
    params = sum(p.numel() for n, p in st[0].auto_model.named_parameters() if "embeddings" not in n)
    return 2.0 * params + 4.0 * cfg.num_hidden_layers * seq * cfg.hidden_size


def main(argv: list[str] | None = None) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch-sizes", default="256,512,1024,2048,4096,8192")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda", help="cpu only for a smoke test of this script")
    ap.add_argument("--peak-tflops", type=float, help="the card's dense peak for fp16 (overrides the table)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch")
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    peaks = next((v for k, v in PEAKS.items() if k in name), None)
    texts = statements(args.n)
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    rows, best = [], {}
    for dtype in args.dtypes.split(","):
        st = SentenceTransformer(str(args.model), device=args.device)
        st = st.half() if dtype == "fp16" else st.float()
        if dtype == "fp32":
            torch.backends.cuda.matmul.allow_tf32 = False
        time_encode(st, texts[: min(len(texts), 20_000)], 1024, 1)  # warm-up: CUDA context, kernels, allocator
        for bs in sizes:
            try:
                secs = time_encode(st, texts, bs, args.repeats)
            except torch.OutOfMemoryError:
                rows.append({"dtype": dtype, "batch_size": bs, "oom": True})
                if args.device == "cuda":
                    torch.cuda.empty_cache()
                continue
            med = statistics.median(secs)
            row = {
                "dtype": dtype,
                "batch_size": bs,
                "median_s": med,
                "min_s": min(secs),
                "max_s": max(secs),
                "sentences_per_s": args.n / med,
                "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else 0.0,
            }
            rows.append(row)
            if row["sentences_per_s"] > best.get(dtype, {}).get("sentences_per_s", 0):
                best[dtype] = row
            if args.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
        split = forward_only(st, texts, best[dtype]["batch_size"], args.repeats)
        seq = split["padded_tokens"] / args.n
        fpt = flops_per_token(st, seq)
        achieved = fpt * split["padded_tokens"] / split["forward_s"] / 1e12
        if dtype == "fp16" and args.peak_tflops:
            peak = args.peak_tflops
        else:
            peak = (peaks[0] if dtype == "fp16" else peaks[2]) if peaks else None
        best[dtype].update(
            {
                **split,
                "tokenise_sentences_per_s": args.n / split["tokenise_s"],
                "forward_sentences_per_s": args.n / split["forward_s"],
                "mean_padded_tokens": seq,
                "mean_real_tokens": split["real_tokens"] / args.n,
                "gflop_per_sentence": fpt * seq / 1e9,
                "forward_tflops": achieved,
                "peak_tflops": peak,
                "fraction_of_peak": achieved / peak if peak else None,
            }
        )
        del st
        if args.device == "cuda":
            torch.cuda.empty_cache()

    print(f"\n{name}, torch {torch.__version__}, {args.n} statements, median of {args.repeats}\n")
    print("| dtype | batch size | encode s (min-max) | sentences/s | peak GPU mem GiB |")
    print("|---|---|---|---|---|")
    for r in rows:
        if r.get("oom"):
            print(f"| {r['dtype']} | {r['batch_size']} | out of memory | | |")
            continue
        print(
            f"| {r['dtype']} | {r['batch_size']} | {r['median_s']:.2f} ({r['min_s']:.2f}-{r['max_s']:.2f}) | "
            f"{r['sentences_per_s']:,.0f} | {r['peak_mem_gib']:.1f} |"
        )
    print(
        "\n| dtype | best batch | encode sent/s | tokenise only sent/s (CPU) | forward only sent/s (GPU) | "
        "tokens/sent (padded/real) | GFLOP/sent | forward TFLOP/s | of peak |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype, b in best.items():
        frac = f"{b['fraction_of_peak']:.1%} of {b['peak_tflops']:.0f}" if b["fraction_of_peak"] else "n/a"
        print(
            f"| {dtype} | {b['batch_size']} | {b['sentences_per_s']:,.0f} | {b['tokenise_sentences_per_s']:,.0f} | "
            f"{b['forward_sentences_per_s']:,.0f} | {b['mean_padded_tokens']:.1f}/{b['mean_real_tokens']:.1f} | "
            f"{b['gflop_per_sentence']:.3f} | {b['forward_tflops']:.1f} | {frac} |"
        )
    result = {"device": name, "torch": torch.__version__, "n": args.n, "rows": rows, "best": best}
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_embed.json").write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()

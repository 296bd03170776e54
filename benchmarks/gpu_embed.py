"""GPU embedding throughput of a sentence-transformers model on short failure statements.

    python benchmarks/gpu_embed.py --model DIR [--n 100000] [--batch-sizes 512,1024,2048,4096] [--dtypes fp32,fp16]

Standalone: needs torch, sentence-transformers and a model folder (e.g. one written by
benchmarks/pack_model_fp16.py); FailAtlas's fast path, embed/fast_encode.py, is loaded by file path (it needs
nothing else of FailAtlas). For each dtype and batch size it times, side by side on the same texts (repeats
interleaved), `SentenceTransformer.encode` ("plain") and `FastEncoder.encode` ("fast": the model's Rust tokenizer
in a background thread ahead of the model, the path `SentenceTransformerEmbedder` takes) of `n` synthetic short
statements end to end (tokenising included, vectors normalised and copied back to the host), median of
`--repeats`, and the ratio fast/plain. Then, at each path's best batch size, it splits the time: tokenising alone
(CPU: sentence-transformers' own, and the fast path's) and the pure forward pass on pre-tokenised, length-sorted
batches (GPU), and estimates how far the forward pass is from the card's peak: FLOPs per sentence (2 x
non-embedding parameters per real token plus attention) x throughput vs the peak of the card (dense tensor-core
fp16 / tf32 peak from a small table, or --peak-tflops). Last, `--stage-rows` time the fast path as the embed stage
calls it (fp32 model, one encode per chunk of texts; by default its defaults, chunks of 4096 and batch size 64).
Prints Markdown tables; writes gpu_embed.json into $OUT when it is set.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

FAST_ENCODE = Path(__file__).resolve().parents[1] / "embed" / "fast_encode.py"
STAGE_ROWS = "4096:64"  # embed/stage.py's WRITE_CHUNK : the embed stage's default CPU batch size

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


def load_fast_encode():  # noqa: ANN201
    """embed/fast_encode.py as a module, without importing the `embed` package (which needs duckdb)."""
    spec = importlib.util.spec_from_file_location("failatlas_fast_encode", FAST_ENCODE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def plain_encode(st, texts: list[str], bs: int):  # noqa: ANN001, ANN201
    return st.encode(texts, batch_size=bs, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def timed(fn, *args) -> tuple[float, object]:  # noqa: ANN001
    sync()
    t = time.perf_counter()
    out = fn(*args)
    sync()
    return time.perf_counter() - t, out


def time_both(st, fast, texts: list[str], bs: int, repeats: int) -> dict:  # noqa: ANN001
    """Plain and fast encode of the same texts, repeats interleaved; seconds of each and the vectors' max gap."""
    secs: dict[str, list[float]] = {"plain": [], "fast": []}
    out = {}
    for _ in range(repeats):
        for path, fn in (("plain", plain_encode), ("fast", fast.encode)):
            s, out[path] = timed(fn, st, texts, bs) if path == "plain" else timed(fn, texts, bs)
            secs[path].append(s)
    gap = float(abs(out["plain"].astype("float32") - out["fast"]).max())
    return {"secs": secs, "max_abs_diff": gap}


def fast_tokenise_only(fast, texts: list[str], bs: int) -> float:  # noqa: ANN001
    """Seconds for the fast path's tokenising of all batches on one thread (the Rust tokenizer's own threads)."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    t = time.perf_counter()
    for lo in range(0, len(texts), bs):
        fast.tokenise([texts[i] for i in order[lo : lo + bs]])
    return time.perf_counter() - t


def stage_like(fast, texts: list[str], chunk: int, bs: int) -> float:  # noqa: ANN001
    """Seconds for the fast path called as the embed stage calls it: one encode per chunk of texts (the store write
    between chunks not included)."""
    sync()
    t = time.perf_counter()
    for lo in range(0, len(texts), chunk):
        fast.encode(texts[lo : lo + chunk], bs)
    sync()
    return time.perf_counter() - t


def forward_only(st, texts: list[str], bs: int, repeats: int) -> dict:  # noqa: ANN001
    """Tokenise once (timed on its own), then time only the model's forward over the sorted batches."""
    import torch

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    t = time.perf_counter()
    preprocess = getattr(st, "preprocess", None) or st.tokenize  # tokenize before sentence-transformers 6
    batches = [preprocess([texts[i] for i in order[lo : lo + bs]]) for lo in range(0, len(texts), bs)]
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
    ap.add_argument("--batch-sizes", default="512,1024,2048,4096")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda", help="cpu only for a smoke test of this script")
    ap.add_argument("--peak-tflops", type=float, help="the card's dense peak for fp16 (overrides the table)")
    ap.add_argument(
        "--stage-rows",
        default=STAGE_ROWS,
        help="CHUNK:BATCH,... : fp32 fast path called once per chunk, as the embed stage does ('' for none)",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch")
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    peaks = next((v for k, v in PEAKS.items() if k in name), None)
    fast_encode = load_fast_encode()
    texts = statements(args.n)
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    rows, best = [], {}
    stage_rows = []
    for dtype in args.dtypes.split(","):
        st = SentenceTransformer(str(args.model), device=args.device)
        st = st.half() if dtype == "fp16" else st.float()
        if dtype == "fp32":
            torch.backends.cuda.matmul.allow_tf32 = False
        fast = fast_encode.FastEncoder.for_model(st)
        if fast is None:
            raise SystemExit("the model cannot take the fast path (see embed/fast_encode.py's for_model)")
        warm = texts[: min(len(texts), 20_000)]  # CUDA context, kernels, allocator, tokenizer threads
        plain_encode(st, warm, 1024)
        fast.encode(warm, 1024)
        for bs in sizes:
            try:
                both = time_both(st, fast, texts, bs, args.repeats)
            except torch.OutOfMemoryError:
                rows.append({"dtype": dtype, "batch_size": bs, "oom": True})
                if args.device == "cuda":
                    torch.cuda.empty_cache()
                continue
            row = {"dtype": dtype, "batch_size": bs, "max_abs_diff": both["max_abs_diff"]}
            for path, secs in both["secs"].items():
                med = statistics.median(secs)
                row[path] = {"median_s": med, "min_s": min(secs), "max_s": max(secs), "sentences_per_s": args.n / med}
                if row[path]["sentences_per_s"] > best.get((dtype, path), {}).get("sentences_per_s", 0):
                    best[(dtype, path)] = {"batch_size": bs, **row[path]}
            row["ratio"] = row["fast"]["sentences_per_s"] / row["plain"]["sentences_per_s"]
            row["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else 0.0
            rows.append(row)
            print(
                f"{dtype} bs={bs}: plain {row['plain']['sentences_per_s']:,.0f}/s, fast "
                f"{row['fast']['sentences_per_s']:,.0f}/s, x{row['ratio']:.2f}, max|diff| {row['max_abs_diff']:.1e}",
                flush=True,
            )
            if args.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
        plain_best, fast_best = best[(dtype, "plain")], best[(dtype, "fast")]
        split = forward_only(st, texts, plain_best["batch_size"], args.repeats)
        seq = split["padded_tokens"] / args.n
        fpt = flops_per_token(st, seq)
        achieved = fpt * split["padded_tokens"] / split["forward_s"] / 1e12
        if dtype == "fp16" and args.peak_tflops:
            peak = args.peak_tflops
        else:
            peak = (peaks[0] if dtype == "fp16" else peaks[2]) if peaks else None
        fast_tok = fast_tokenise_only(fast, texts, fast_best["batch_size"])
        plain_best.update(
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
        fast_best.update(
            {
                "tokenise_sentences_per_s": args.n / fast_tok,
                "forward_sentences_per_s": plain_best["forward_sentences_per_s"],
                "fraction_of_forward": fast_best["sentences_per_s"] / plain_best["forward_sentences_per_s"],
            }
        )
        for pair in args.stage_rows.split(",") if dtype == "fp32" and args.stage_rows else []:
            chunk, bs = (int(x) for x in pair.split(":"))
            secs = stage_like(fast, texts, chunk, bs)
            stage_rows.append({"chunk": chunk, "batch_size": bs, "seconds": secs, "sentences_per_s": args.n / secs})
        del st, fast
        if args.device == "cuda":
            torch.cuda.empty_cache()

    print(f"\n{name}, torch {torch.__version__}, {args.n} statements, median of {args.repeats}\n")
    print(
        "| dtype | batch size | plain encode s (min-max) | plain sent/s | fast encode s (min-max) | fast sent/s | "
        "fast/plain | max abs diff | peak GPU mem GiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("oom"):
            print(f"| {r['dtype']} | {r['batch_size']} | out of memory | | | | | | |")
            continue
        p, f = r["plain"], r["fast"]
        print(
            f"| {r['dtype']} | {r['batch_size']} | {p['median_s']:.2f} ({p['min_s']:.2f}-{p['max_s']:.2f}) | "
            f"{p['sentences_per_s']:,.0f} | {f['median_s']:.2f} ({f['min_s']:.2f}-{f['max_s']:.2f}) | "
            f"{f['sentences_per_s']:,.0f} | {r['ratio']:.2f} | {r['max_abs_diff']:.1e} | {r['peak_mem_gib']:.1f} |"
        )
    print(
        "\n| dtype | path | best batch | encode sent/s | tokenise only sent/s (CPU) | forward only sent/s (GPU) | "
        "tokens/sent (padded/real) | GFLOP/sent | forward TFLOP/s | of peak |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (dtype, path), b in best.items():
        if path == "fast":
            print(
                f"| {dtype} | fast | {b['batch_size']} | {b['sentences_per_s']:,.0f} | "
                f"{b['tokenise_sentences_per_s']:,.0f} | {b['forward_sentences_per_s']:,.0f} "
                f"(end to end = {b['fraction_of_forward']:.0%} of it) | | | | |"
            )
            continue
        frac = f"{b['fraction_of_peak']:.1%} of {b['peak_tflops']:.0f}" if b["fraction_of_peak"] else "n/a"
        print(
            f"| {dtype} | plain | {b['batch_size']} | {b['sentences_per_s']:,.0f} | "
            f"{b['tokenise_sentences_per_s']:,.0f} | {b['forward_sentences_per_s']:,.0f} | "
            f"{b['mean_padded_tokens']:.1f}/{b['mean_real_tokens']:.1f} | {b['gflop_per_sentence']:.3f} | "
            f"{b['forward_tflops']:.1f} | {frac} |"
        )
    if stage_rows:
        print("\nfast path as the embed stage calls it (fp32, one encode per chunk, store writes not included)\n")
        print("| chunk | batch size | s | sentences/s |\n|---|---|---|---|")
        for r in stage_rows:
            print(f"| {r['chunk']} | {r['batch_size']} | {r['seconds']:.2f} | {r['sentences_per_s']:,.0f} |")
    result = {
        "device": name,
        "torch": torch.__version__,
        "n": args.n,
        "rows": rows,
        "best": {f"{d}/{p}": b for (d, p), b in best.items()},
        "stage_like": stage_rows,
    }
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_embed.json").write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()

"""A seeded synthetic corpus of short failure statements with a known kind per statement (for ARI).

    python benchmarks/corpus.py --n 100000 --seed 0 --out corpus.jsonl

Statements come from templates over 24 kinds of agent/experiment failure, with varied module names, paths,
numbers, task nouns and phrasing, plus TRAIL's GAIA annotator descriptions (label = their category) when the
shared data is present. Real failure logs repeat a lot: a fraction `dup` of the statements (default 0.4) is
drawn again from statements already emitted, with a Zipf-like preference for the popular ones, so about
that fraction of the corpus is exact duplicates.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the shared data beside the checkout, or where FAILATLAS_SHARED_DATA says (as the tests read it)
TRAIL = (Path(os.environ.get("FAILATLAS_SHARED_DATA") or ROOT.parent / "shared" / "data")
         / "trail" / "trail_errors_gaia.jsonl")

MODULES = ["numpy", "torch", "pandas", "sklearn", "transformers", "datasets", "scipy", "matplotlib",
           "jax", "einops", "timm", "wandb", "accelerate", "peft", "tqdm", "lightgbm", "xgboost", "networkx",
           "sentencepiece", "tokenizers", "faiss", "opencv", "pyyaml", "hydra", "omegaconf", "evaluate"]
FILES = ["train.py", "eval.py", "model.py", "data/loader.py", "utils/metrics.py", "run_experiment.py",
         "src/main.py", "scripts/preprocess.py", "configs/base.yaml", "models/resnet.py", "analysis.ipynb",
         "baselines/lr.py", "results/summary.csv", "setup.py", "requirements.txt", "src/trainer.py"]
NOUNS = ["learning rate sweep", "ablation", "baseline", "attention variant", "data augmentation",
         "tokenizer", "fine-tuning run", "evaluation split", "robustness test", "scaling experiment",
         "pruning method", "distillation", "retrieval index", "optimizer comparison", "seed study",
         "calibration analysis", "few-shot prompt", "graph model", "contrastive loss", "reward model"]
METRICS = ["accuracy", "F1", "BLEU", "perplexity", "AUROC", "top-1 error", "exact match", "loss", "recall@10"]
DATASETS = ["CIFAR-10", "ImageNet", "MNIST", "SST-2", "MMLU", "GSM8K", "WikiText-103", "SQuAD", "COCO", "QM9"]
FUNCS = ["forward", "load_data", "compute_metrics", "train_epoch", "evaluate", "collate_fn", "build_model",
         "get_optimizer", "save_checkpoint", "parse_args", "main", "preprocess"]

T = dict[str, list[str]]
TEMPLATES: T = {
    "missing_module": ["ModuleNotFoundError: No module named '{mod}' when running {file}",
                       "The agent imported {mod} but it is not installed in the sandbox",
                       "Failed to import {mod}; the {noun} never started",
                       "{file} crashed at import time: package {mod} missing"],
    "missing_file": ["FileNotFoundError: [Errno 2] No such file or directory: '{path}'",
                     "The script expected {path} but the file does not exist",
                     "Could not open {path}; the {noun} aborted",
                     "{file} tried to read {path}, which was never created"],
    "cuda_oom": ["CUDA out of memory while training the {noun} with batch size {n}",
                 "RuntimeError: CUDA out of memory. Tried to allocate {f} GiB in {func}",
                 "GPU memory exhausted at batch size {n} during {func}",
                 "The {noun} ran out of GPU memory after {n} steps"],
    "shape_mismatch": ["RuntimeError: mat1 and mat2 shapes cannot be multiplied ({n}x{m} and {m2}x{n})",
                       "Tensor shape mismatch in {func}: expected [{n}, {m}] got [{n}, {m2}]",
                       "ValueError: operands could not be broadcast together with shapes ({n},) ({m},)",
                       "Dimension error in {file}: the {noun} passes {m}-dim features to a {m2}-dim layer"],
    "timeout": ["The command exceeded the {n} s time limit and was killed",
                "Timed out after {n} seconds while running the {noun}",
                "{file} did not finish within the {n} second budget",
                "Execution timeout: the {noun} on {data} took longer than {n} s"],
    "wrong_metric": ["Reported {metric} instead of the requested {metric2} for the {noun}",
                     "The agent evaluated {metric} although the task asks for {metric2}",
                     "Wrong metric: {metric2} required, {metric} computed on {data}",
                     "The results table lists {metric} but the question concerns {metric2}"],
    "hallucinated_result": ["Claimed {metric} of {p}% on {data} without running any experiment",
                            "The final answer reports numbers ({p}%) that appear in no log",
                            "Fabricated results: the {noun} was never executed yet {metric} is reported",
                            "The conclusion cites a {metric} of {p} that the code never produced"],
    "wrong_dataset": ["Used {data} instead of {data2} for the {noun}",
                      "The agent trained on {data} but the task specifies {data2}",
                      "Evaluation ran on the wrong dataset ({data}, expected {data2})",
                      "Loaded {data} split where {data2} was required"],
    "no_baseline": ["No baseline was run for the {noun}, so the comparison is meaningless",
                    "The agent skipped the baseline and reported only the {noun}",
                    "Missing control condition: the {noun} lacks a baseline on {data}",
                    "Compared against nothing: the baseline for the {noun} was never trained"],
    "single_seed": ["Results come from a single seed; no variance is reported for the {noun}",
                    "Only one random seed was used, so the {metric} difference of {p} is not significant",
                    "The {noun} draws conclusions from one run without repeats",
                    "No error bars: the {noun} was run once with seed {n}"],
    "syntax_error": ["SyntaxError: invalid syntax in {file} line {n}",
                     "The generated code in {file} does not parse (line {n})",
                     "IndentationError: unexpected indent at {file}:{n}",
                     "The patch to {file} left an unclosed bracket at line {n}"],
    "attribute_error": ["AttributeError: '{mod}' object has no attribute '{func}'",
                        "Called {func} on a {mod} object which has no such method",
                        "AttributeError in {file}: module '{mod}' has no attribute '{func}'",
                        "The code used {mod}.{func}, an API that does not exist in this version"],
    "nan_loss": ["Loss became NaN after {n} steps of the {noun}",
                 "Training diverged: loss is nan at epoch {m}",
                 "NaN values appeared in {func} and the {noun} produced no usable model",
                 "The {noun} exploded with learning rate {f}; loss went to inf then nan"],
    "data_leak": ["Test data from {data} leaked into training in {file}",
                  "The {noun} tuned hyperparameters on the test split",
                  "Train and test sets overlap: {n} examples of {data} appear in both",
                  "Evaluation on {data} is contaminated because the test set was used for early stopping"],
    "instruction_ignored": ["The agent ignored the instruction to modify only {file}",
                            "Task required editing {file} but the agent rewrote {file2}",
                            "The agent did not follow the requested output format for the {noun}",
                            "Instructions said to use {mod}, the agent used {mod2} instead"],
    "permission_denied": ["PermissionError: [Errno 13] Permission denied: '{path}'",
                          "Could not write to {path}: permission denied",
                          "The sandbox refused write access to {path} during the {noun}",
                          "Access denied when saving the checkpoint to {path}"],
    "network_blocked": ["Connection refused while downloading {data} from the hub",
                        "Network access is disabled; pip install {mod} failed",
                        "HTTPError 403 when fetching {data} weights",
                        "The {noun} needs internet to fetch {data}, which the sandbox blocks"],
    "wrong_conclusion": ["The conclusion contradicts the measured {metric}: {p} vs {p2}",
                         "The agent concluded the {noun} helps although {metric} dropped by {p}",
                         "Claims an improvement that the reported {metric} does not support",
                         "The write-up states the opposite of what the {noun} results show"],
    "incomplete_run": ["The {noun} stopped after {n} of {m} epochs and results are partial",
                       "Only {n} of the {m} configurations of the {noun} were run",
                       "The experiment was cut short; {file} never wrote results",
                       "The agent gave up on the {noun} before the evaluation step"],
    "type_error": ["TypeError: {func}() got an unexpected keyword argument '{kw}'",
                   "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int' in {func}",
                   "Passed a string where {func} expects a tensor in {file}",
                   "TypeError in {file}: {func}() missing 1 required positional argument: '{kw}'"],
    "version_conflict": ["{mod} {v} is incompatible with {mod2} {v2}",
                         "ImportError: cannot import name '{func}' from '{mod}' (version {v})",
                         "Dependency conflict: {mod} requires {mod2}>={v2}",
                         "pip could not resolve versions of {mod} and {mod2}"],
    "bad_hyperparameter": ["Learning rate {f} is far outside the range used for the {noun}",
                           "Batch size {n} chosen for the {noun} makes training unstable",
                           "The agent set weight decay to {f}, which the paper never uses",
                           "Hyperparameters of the {noun} do not match the configuration in {file}"],
    "tool_misuse": ["The agent called the search tool with an empty query",
                    "Tool call to {func} failed: malformed JSON arguments",
                    "The agent used the shell tool to edit {file} with a broken sed command",
                    "Repeated the same {func} tool call {n} times without progress"],
    "plotting_error": ["matplotlib failed to save the figure to {path}",
                       "The plot of {metric} has unlabelled axes and no legend",
                       "The figure for the {noun} shows the wrong series",
                       "Plotting crashed in {func}: no display available"],
}
CONTEXT = [" (task iclr2024-{k})", " at step {s}", " in run {k}", " during attempt {s}",
           " [task {k}, step {s}]"]
KW = ["lr", "device", "num_workers", "dropout", "seed", "epochs", "config", "labels"]


def fill(template: str, rng: random.Random) -> str:
    def pick(xs: list[str]) -> str:
        return xs[rng.randrange(len(xs))]

    mod, mod2 = rng.sample(MODULES, 2)
    data, data2 = rng.sample(DATASETS, 2)
    metric, metric2 = rng.sample(METRICS, 2)
    file, file2 = rng.sample(FILES, 2)
    n = rng.choice([8, 16, 32, 64, 128, 256, 512, 1024, 3, 5, 10, 100, 300, 600, 1800, 3600])
    m = rng.randrange(2, 2049)
    return template.format(
        mod=mod, mod2=mod2, data=data, data2=data2, metric=metric, metric2=metric2, file=file, file2=file2,
        path=f"/workspace/{pick(['data', 'outputs', 'ckpt', 'results', 'cache'])}/{pick(FILES)}",
        noun=pick(NOUNS), func=pick(FUNCS), kw=pick(KW), n=n, m=m, m2=m + rng.randrange(1, 512),
        f=rng.choice(["0.1", "1e-5", "3e-4", "10", "2.5", "0.01", "1.0", "5e-2"]),
        p=f"{rng.uniform(1, 99):.1f}", p2=f"{rng.uniform(1, 99):.1f}",
        v=f"{rng.randrange(0, 3)}.{rng.randrange(0, 20)}", v2=f"{rng.randrange(1, 4)}.{rng.randrange(0, 20)}",
    )


def trail_rows() -> list[tuple[str, str]]:
    if not TRAIL.is_file():
        return []
    rows = [json.loads(line) for line in TRAIL.read_text().splitlines() if line.strip()]
    return [(r["description"], "trail:" + r["category"]) for r in rows if r.get("description")]


def generate(n: int, seed: int = 0, dup: float = 0.4, with_trail: bool = True) -> tuple[list[str], list[str]]:
    """(texts, labels) of `n` statements. About `dup` of them repeat an earlier statement."""
    rng = random.Random(seed)
    kinds = sorted(TEMPLATES)
    weights = [1.0 / (1 + i) ** 0.5 for i in range(len(kinds))]  # some kinds are more common
    texts: list[str] = []
    labels: list[str] = []
    trail = trail_rows() if with_trail else []
    for text, label in trail[: n // 4]:
        texts.append(text)
        labels.append(label)
    while len(texts) < n:
        if texts and rng.random() < dup:
            i = min(int(rng.paretovariate(1.2)) - 1, len(texts) - 1)  # popular = early ones, Zipf-like
            j = len(texts) - 1 - i if rng.random() < 0.5 else i
            texts.append(texts[j])
            labels.append(labels[j])
            continue
        kind = rng.choices(kinds, weights)[0]
        text = fill(rng.choice(TEMPLATES[kind]), rng)
        if rng.random() < 0.5:  # where it happened: real statements often name the task or step
            text += rng.choice(CONTEXT).format(k=rng.randrange(1000), s=rng.randrange(1, 60))
        texts.append(text)
        labels.append(kind)
    order = list(range(n))
    rng.shuffle(order)
    return [texts[i] for i in order], [labels[i] for i in order]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dup", type=float, default=0.4)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    texts, labels = generate(args.n, args.seed, args.dup)
    with args.out.open("w") as f:
        for t, lab in zip(texts, labels, strict=True):
            f.write(json.dumps({"text": t, "label": lab}) + "\n")
    print(f"{len(texts)} statements, {len(set(texts))} distinct, {len(set(labels))} labels -> {args.out}")


if __name__ == "__main__":
    main()

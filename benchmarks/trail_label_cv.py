"""How issue 41's label model was chosen: cross-validation inside one half of TRAIL GAIA, never the other.

    python benchmarks/trail_label_cv.py [--half 0|1 ...] [--reps 2] [--model all-MiniLM-L6-v2] [--only NAME ...]

For a training half (trace id parity, as `quality_trail.py --transfer` splits GAIA), its traces are dealt into 5
folds (shuffled, `--reps` shuffles); per fold, the classifier learns from the other folds' examples (the half's
JSONL as `taxonomy build --examples` reads it) plus the TRAIL seed's own rows (`training_set`), and assigns every
distinct description of the held-out fold's traces (majority label), every statement assigned (no threshold).
Accuracy and ARI over the pooled predictions of a shuffle, mean over shuffles. Vectors come from the product's
embedder, cached by text in /tmp/trail_label_cv (override with --cache). Prints one Markdown row per variant.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix, hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality_trail as qt  # noqa: E402

from failatlas.taxonomy.learned import match_seed, read_examples, training_set  # noqa: E402
from failatlas.taxonomy.seeding import load_seed  # noqa: E402

VARIANTS = {  # name -> keyword arguments of `fit_predict`; the first is the model shipped before issue 41
    "before: C=4, words 1-2-grams": {},
    "C=1": {"C": 1}, "C=2": {"C": 2}, "C=8": {"C": 8}, "C=16": {"C": 16},
    "TF-IDF weight 2": {"w": 2}, "TF-IDF weight 3": {"w": 3}, "words 1-3-grams": {"ngram": (1, 3)},
    "seed rows weighted x3": {"seed_w": 3.0}, "no seed rows": {"seed_rows": False},
    "balanced classes": {"cw": "balanced"},
    "chars 2-5 (weight 1)": {"char": 1.0},
    "chars 0.5, C=16": {"C": 16, "char": 0.5}, "chars 1, C=16": {"C": 16, "char": 1.0},
    "chars 2, C=16": {"C": 16, "char": 2.0},
    "chosen: chars 1, balanced, C=4": {"char": 1.0, "cw": "balanced"},
    "chars 1, balanced, C=16": {"C": 16, "char": 1.0, "cw": "balanced"},
    "chars 1, balanced, C=16, seed rows x3": {"C": 16, "char": 1.0, "cw": "balanced", "seed_w": 3.0},
}


def fit_predict(X, texts, y, src, Z, ztexts, C=4.0, w=1.0, ngram=(1, 2), char=0.0, cw=None, seed_w=1.0):  # noqa: ANN001, ANN201, N803
    """LabelModel's features and regression (argmax only: the temperature does not move it)."""
    words = TfidfVectorizer(ngram_range=ngram, sublinear_tf=True, min_df=2 if len(texts) > 50 else 1).fit(texts)
    chars = (TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2).fit(texts)
             if char else None)

    def features(V, T):  # noqa: ANN001, ANN202, N803
        parts = [csr_matrix(V), w * words.transform(T)]
        if chars is not None:
            parts.append(char * chars.transform(T))
        return hstack(parts).tocsr()

    weights = np.where(src == "seed", seed_w, 1.0)
    model = LogisticRegression(C=C, max_iter=3000, class_weight=cw).fit(features(X, texts), y, sample_weight=weights)
    return model.predict(features(Z, ztexts))


class Vectors:
    def __init__(self, model: str, cache: Path) -> None:
        self.model, self.file = model, cache / f"vectors_{model.replace('/', '_')}.npz"
        self.known: dict[str, np.ndarray] = {}
        if self.file.exists():
            z = np.load(self.file, allow_pickle=True)
            self.known = dict(zip(z["t"].tolist(), z["v"], strict=True))

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self.known})
        if missing:
            from failatlas.embed import get_embedder

            for t, v in zip(missing, get_embedder(self.model).encode(missing, 32), strict=True):
                self.known[t] = np.asarray(v, np.float32)
            np.savez(self.file, t=np.array(list(self.known), dtype=object), v=np.stack(list(self.known.values())))
        return np.stack([self.known[t] for t in texts])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--only", nargs="*", help="variant names to run (default: all)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/trail_label_cv"))
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    vectors = Vectors(args.model, args.cache)
    seed = load_seed("trail")
    cats = seed.categories_for("other")

    def canon(label: str) -> str:
        c = match_seed(label, cats)
        return c.name if c else label

    data = qt.read_trail(qt.DEFAULT_DATA)
    lines = [x for x in data.path.read_text().splitlines() if x.strip()]
    halves = {}
    for h in args.half:
        mine = [x for x in lines if qt.trace_half(json.loads(x)["trace_id"]) == h]
        path = args.cache / f"half{h}.jsonl"
        path.write_text("\n".join(mine) + "\n")
        halves[h] = (read_examples([path]), [json.loads(x)["trace_id"] for x in mine],
                     [r for r in data.rows if qt.trace_half(r["trace_id"]) == h and r["description"] is not None])
    head = " | ".join(f"accuracy half {h} | ARI half {h}" for h in args.half)
    print(f"| variant | {head} | accuracy mean | ARI mean |\n|---" + "|---" * (2 * len(args.half) + 2) + "|")
    for name, kw in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        kw = dict(kw)
        seed_rows = kw.pop("seed_rows", True)
        scores = []
        for h in args.half:
            examples, traces, rows = halves[h]
            accs, aris = [], []
            for rep in range(args.reps):
                order = sorted(set(traces))
                np.random.default_rng(rep).shuffle(order)
                fold_of = {t: i % 5 for i, t in enumerate(order)}
                predicted, truth = [], []
                for f in range(5):
                    train = [e for e, t in zip(examples, traces, strict=True) if fold_of[t] != f]
                    rows_, _ = training_set(seed, train, [], "other", seed_rows=seed_rows)
                    votes: dict[str, Counter] = {}
                    for r in rows:
                        if fold_of[r["trace_id"]] == f:
                            votes.setdefault(r["description"], Counter())[r["category"]] += 1
                    texts = sorted(votes)
                    truth += [canon(sorted(votes[t].items(), key=lambda kv: (-kv[1], kv[0]))[0][0]) for t in texts]
                    got = fit_predict(vectors(rows_.texts), rows_.texts, rows_.labels, np.asarray(rows_.sources),
                                      vectors(texts), texts, **kw)
                    predicted += [canon(p) for p in got]
                p, t = np.array(predicted, object), np.array(truth, object)
                accs.append((p == t).mean())
                aris.append(adjusted_rand_score(t, p))
            scores.append((float(np.mean(accs)), float(np.mean(aris))))
        cells = " | ".join(f"{a:.3f} | {r:.3f}" for a, r in scores)
        print(f"| {name} | {cells} | {np.mean([a for a, _ in scores]):.3f} | {np.mean([r for _, r in scores]):.3f} |",
              flush=True)


if __name__ == "__main__":
    main()

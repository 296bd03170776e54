"""How issue 41's label model was chosen: cross-validation inside one half of TRAIL GAIA, never the other.

    python benchmarks/trail_label_cv.py [--half 0|1 ...] [--reps 2] [--model all-MiniLM-L6-v2] [--only NAME ...]
    python benchmarks/trail_label_cv.py --reps 5 --only "chosen: chars 1, balanced, C=4" "chosen + prior^0.2"

For a training half (trace id parity, as `quality_trail.py --transfer` splits GAIA), its traces are dealt into 5
folds (shuffled, `--reps` shuffles); per fold, the classifier learns from the other folds' examples (the half's
JSONL as `taxonomy build --examples` reads it) plus the TRAIL seed's own rows (`training_set`), and assigns every
distinct description of the held-out fold's traces (majority label), every statement assigned (no threshold).
Accuracy and ARI over the pooled predictions of a shuffle, mean over shuffles (and the ARI's sd). Vectors
come from the product's embedder, cached by text in /tmp/trail_label_cv (override with --cache). Prints one
Markdown row per variant.

The transductive variants (issue 41, third pass) also read unlabelled statements, as a build could: the held-out
fold's descriptions plus every description of the other half (its texts, never its labels), which is what
`taxonomy build --examples` has in hand on a store of the other half. They are label spreading over a k-NN graph
of the embeddings, a k-NN vote blended with the regression, self-training on confident pseudo-labels, TF-IDF
vocabularies fitted on the pool too, a prior shift (`prior`: beta * log of the training class shares added to the
scores, undoing part of the class balancing) and numbers / hex ids normalised before TF-IDF.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix, hstack, vstack
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
CHOSEN = {"char": 1.0, "cw": "balanced"}
VARIANTS |= {f"chosen + {name}": CHOSEN | kw for name, kw in {
    "k-NN vote (10) blended 0.2": {"knn": (10, 0.2)},
    "label spreading (alpha 0.3, k 10)": {"spread": (0.3, 10)},
    "self-training (p >= 0.5, weight 0.5)": {"self_train": (0.5, 0.5)},
    "TF-IDF fitted on the pool too": {"pool_vocab": True},
    "numbers and ids normalised": {"normalise_text": True},
    "prior^0.2": {"prior": 0.2},
}.items()}


def normalise(text: str) -> str:
    """Lower case; hex ids and numbers replaced by one token each (span ids, paths and counts vary per trace)."""
    text = re.sub(r"\b[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b", " hexid ", text.lower())
    return re.sub(r"\d+(?:\.\d+)?", " 0 ", text)


def unit(a: np.ndarray) -> np.ndarray:
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def spread_labels(train: np.ndarray, onehot: np.ndarray, pool: np.ndarray, prior: np.ndarray, alpha: float,
                  k: int, sigma: float = 0.1) -> np.ndarray:
    """Label spreading (Zhou et al. 2004) over a symmetric k-NN graph of cosine similarities: training rows start
    at their label, pool rows at the regression's probabilities; scores of the pool rows after 30 steps."""
    v = unit(np.vstack([train, pool]))
    y0 = np.vstack([onehot, prior])
    s = v @ v.T
    np.fill_diagonal(s, -np.inf)
    near = np.argpartition(-s, k, axis=1)[:, :k]
    rows = np.repeat(np.arange(len(v)), k)
    w = np.zeros_like(s)
    w[rows, near.ravel()] = np.exp((s[rows, near.ravel()] - 1) / sigma)
    w = np.maximum(w, w.T)
    d = 1 / np.sqrt(np.maximum(w.sum(axis=1), 1e-12))
    step = d[:, None] * w * d[None, :]
    f = y0
    for _ in range(30):
        f = alpha * step @ f + (1 - alpha) * y0
    return f[len(train):]


def fit_predict(X, texts, y, src, Z, ztexts, U=None, utexts=(), C=4.0, w=1.0, ngram=(1, 2), char=0.0, cw=None,  # noqa: ANN001, ANN201, N803, PLR0913
                seed_w=1.0, knn=None, spread=None, self_train=None, pool_vocab=False, normalise_text=False,
                prior=0.0):
    """LabelModel's features and regression (argmax only: the temperature does not move it); `U`/`utexts` are
    unlabelled statements besides `Z`, read only by the transductive variants."""
    pool_v = np.vstack([Z, U]) if U is not None and len(U) else Z
    pool_t = list(ztexts) + list(utexts)
    vocab = list(texts) + (pool_t if pool_vocab else [])
    pre = normalise if normalise_text else None
    words = TfidfVectorizer(ngram_range=ngram, sublinear_tf=True, min_df=2 if len(texts) > 50 else 1,
                            preprocessor=pre).fit(vocab)
    chars = (TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2, preprocessor=pre)
             .fit(vocab) if char else None)

    def features(V, T):  # noqa: ANN001, ANN202, N803
        parts = [csr_matrix(V), w * words.transform(T)]
        if chars is not None:
            parts.append(char * chars.transform(T))
        return hstack(parts).tocsr()

    weights = np.where(src == "seed", seed_w, 1.0)
    train_f, pool_f = features(X, texts), features(pool_v, pool_t)
    model = LogisticRegression(C=C, max_iter=3000, class_weight=cw).fit(train_f, y, sample_weight=weights)
    if self_train:
        least, weight = self_train
        proba = model.predict_proba(pool_f)
        keep = proba.max(axis=1) >= least
        model = LogisticRegression(C=C, max_iter=3000, class_weight=cw).fit(
            vstack([train_f, pool_f[keep]]).tocsr(), np.concatenate([y, model.classes_[proba.argmax(axis=1)][keep]]),
            sample_weight=np.concatenate([weights, np.full(int(keep.sum()), weight)]))
    classes = model.classes_
    scores = model.decision_function(pool_f)
    if scores.ndim == 1:  # two classes: one score, as LabelModel widens it
        scores = np.stack([-scores / 2, scores / 2], axis=1)
    if prior:
        scores = scores + prior * np.log([np.mean(np.asarray(y) == c) for c in classes])
    onehot = (np.asarray(y, dtype=object)[:, None] == classes[None, :]).astype(float)
    if knn:
        k, blend = knn
        sims = unit(pool_v) @ unit(X).T
        near = np.argsort(-sims, axis=1)[:, :k]
        votes = np.exp(np.take_along_axis(sims, near, axis=1) / 0.1)
        vote = (votes[:, :, None] * onehot[near]).sum(axis=1) / votes.sum(axis=1, keepdims=True)
        scores = (1 - blend) * softmax(scores) + blend * vote
    if spread:
        scores = spread_labels(X, onehot, pool_v, softmax(scores), *spread)
    return classes[scores[: len(ztexts)].argmax(axis=1)]


def deal_folds(traces: list[str], rep: int, k: int = 5) -> dict[str, int]:
    """trace id -> its fold: the distinct traces sorted, shuffled by shuffle `rep`, dealt round-robin into k."""
    order = sorted(set(traces))
    np.random.default_rng(rep).shuffle(order)
    return {t: i % k for i, t in enumerate(order)}


def majority(votes: dict[str, Counter], canon) -> tuple[list[str], list[str]]:  # noqa: ANN001
    """The sorted distinct texts and each one's majority label (ties by name), as `canon` spells it."""
    texts = sorted(votes)
    return texts, [canon(sorted(votes[t].items(), key=lambda kv: (-kv[1], kv[0]))[0][0]) for t in texts]


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
    others = {h: sorted({r["description"] for r in data.rows if r["description"] is not None
                         and qt.trace_half(r["trace_id"]) != h}) for h in args.half}
    head = " | ".join(f"accuracy half {h} | ARI half {h}" for h in args.half)
    print(f"| variant | {head} | accuracy mean | ARI mean (± sd over shuffles) |\n|---"
          + "|---" * (2 * len(args.half) + 2) + "|")
    for name, kw in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        kw = dict(kw)
        seed_rows = kw.pop("seed_rows", True)
        scores = []  # per half: (accuracies, ARIs) of each shuffle
        for h in args.half:
            examples, traces, rows = halves[h]
            accs, aris = [], []
            for rep in range(args.reps):
                fold_of = deal_folds(traces, rep)
                predicted, truth = [], []
                for f in range(5):
                    train = [e for e, t in zip(examples, traces, strict=True) if fold_of[t] != f]
                    rows_, _ = training_set(seed, train, [], "other", seed_rows=seed_rows)
                    votes: dict[str, Counter] = {}
                    for r in rows:
                        if fold_of[r["trace_id"]] == f:
                            votes.setdefault(r["description"], Counter())[r["category"]] += 1
                    texts, labels = majority(votes, canon)
                    truth += labels
                    got = fit_predict(vectors(rows_.texts), rows_.texts, rows_.labels, np.asarray(rows_.sources),
                                      vectors(texts), texts, vectors(others[h]), others[h], **kw)
                    predicted += [canon(p) for p in got]
                p, t = np.array(predicted, object), np.array(truth, object)
                accs.append((p == t).mean())
                aris.append(adjusted_rand_score(t, p))
            scores.append((np.array(accs), np.array(aris)))
        cells = " | ".join(f"{a.mean():.3f} | {r.mean():.3f}" for a, r in scores)
        per_shuffle = np.mean([r for _, r in scores], axis=0)
        print(f"| {name} | {cells} | {np.mean([a.mean() for a, _ in scores]):.3f} | {per_shuffle.mean():.3f}"
              f" ± {per_shuffle.std():.3f} |", flush=True)


if __name__ == "__main__":
    main()

"""Issue 41, fourth pass: does fine-tuning the sentence encoder on the training half lift the label model?

    python benchmarks/trail_finetune_cv.py prepare DIR            # folds, held-out pairs, an fp16 model copy
    python benchmarks/trail_finetune_cv.py tune DIR cv 0 DIR/cv_s0.npz         # on a GPU: ~5 min per seed
    python benchmarks/trail_finetune_cv.py tune DIR heldout 0,1,2,3,4 DIR/ho.npz
    python benchmarks/trail_finetune_cv.py score DIR --cv DIR/cv_s0.npz DIR/cv_s1.npz --heldout DIR/ho.npz

`prepare` writes, from TRAIL GAIA's trace-disjoint halves (trace id parity, as `quality_trail.py --transfer`):
the cross-validation folds of `trail_label_cv.py` (per training half, its traces dealt into 5 folds, 2 shuffles;
training rows = the other folds' examples plus the TRAIL seed's own rows, as `taxonomy build --seed trail
--examples` has them; test = the held-out fold's distinct descriptions with their majority label), the two
held-out directions (train on one whole half, test on the other), and all-MiniLM-L6-v2 (the packaged model) in
fp16 so that the folder travels to a GPU machine (64 MiB).

`tune` fine-tunes a fresh copy of the model per fold and seed as a classifier of the training rows (mean-pooled
unit vectors, a linear head on them times 20, cross-entropy with balanced class weights, batches of 16, AdamW at
5e-5 for the encoder and 2e-3 for the head, 10% warm-up then linear decay, the encoder's gradient norm clipped at
1, 25 epochs; the seed fixes the head, the shuffles and the weights' updates) and keeps the tuned vectors of the
training and test texts.

`score` fits the shipped label model's regression (`LabelModel`'s features: embedding + TF-IDF of words and of
characters, balanced classes, C=4) on the frozen vectors and on the tuned ones, averages their probabilities
(the tuned ones averaged over the given seeds first) and prints accuracy and ARI (every test statement assigned):
CV pooled per shuffle and averaged, as `trail_label_cv.py` does; held out per direction. The frozen vectors come
from the product's embedder (cached in DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # quality_trail, trail_label_cv: imported where used


def _canon():  # noqa: ANN202
    from failatlas.taxonomy.learned import match_seed
    from failatlas.taxonomy.seeding import load_seed

    cats = load_seed("trail").categories_for("other")
    return lambda label: (c.name if (c := match_seed(label, cats)) else label)


def prepare(folder: Path) -> None:
    import quality_trail as qt
    from trail_label_cv import deal_folds, majority

    from failatlas.taxonomy.learned import read_examples, training_set
    from failatlas.taxonomy.seeding import load_seed

    folder.mkdir(parents=True, exist_ok=True)
    seed, canon = load_seed("trail"), _canon()
    data = qt.read_trail(qt.DEFAULT_DATA)
    lines = [x for x in data.path.read_text().splitlines() if x.strip()]
    folds, heldout, examples = [], [], {}
    for h in (0, 1):
        mine = [x for x in lines if qt.trace_half(json.loads(x)["trace_id"]) == h]
        (folder / f"half{h}.jsonl").write_text("\n".join(mine) + "\n")
        examples[h] = read_examples([folder / f"half{h}.jsonl"])
        traces = [json.loads(x)["trace_id"] for x in mine]
        rows = [r for r in data.rows if qt.trace_half(r["trace_id"]) == h and r["description"] is not None]
        for rep in range(2):
            fold_of = deal_folds(traces, rep)
            for f in range(5):
                train, _ = training_set(seed, [e for e, t in zip(examples[h], traces, strict=True)
                                               if fold_of[t] != f], [], "other")
                votes: dict[str, Counter] = {}
                for r in rows:
                    if fold_of[r["trace_id"]] == f:
                        votes.setdefault(r["description"], Counter())[r["category"]] += 1
                texts, truth = majority(votes, canon)
                folds.append({"half": h, "rep": rep, "fold": f, "train_texts": train.texts,
                              "train_labels": train.labels, "test_texts": texts, "truth": truth})
    for train_h, test_h in ((0, 1), (1, 0)):
        train, _ = training_set(seed, examples[train_h], [], "other")
        votes = {}
        for r in data.rows:
            if qt.trace_half(r["trace_id"]) == test_h and r["description"] is not None:
                votes.setdefault(r["description"], Counter())[r["category"]] += 1
        texts, truth = majority(votes, canon)
        heldout.append({"half": f"{train_h} -> {test_h}", "train_texts": train.texts,
                        "train_labels": train.labels, "test_texts": texts, "truth": truth})
    (folder / "cv.json").write_text(json.dumps(folds))
    (folder / "heldout.json").write_text(json.dumps(heldout))
    from safetensors.torch import load_file, save_file

    from failatlas.embed.models import packaged_model_dir

    source, model = packaged_model_dir(), folder / "model"
    model.mkdir(exist_ok=True)
    for item in source.rglob("*"):
        if item.is_file() and item.name != "model.safetensors":
            (model / item.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (model / item.relative_to(source)).write_bytes(item.read_bytes())
    weights = load_file(str(source / "model.safetensors"))
    save_file({k: v.half().contiguous() for k, v in weights.items()}, str(model / "model.safetensors"))
    print(f"{len(folds)} folds, {len(heldout)} held-out directions, model in {model}")


def tune(folder: Path, which: str, seeds: list[int], out: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    items = json.loads((folder / ("cv.json" if which == "cv" else "heldout.json")).read_text())
    result, started = {}, time.perf_counter()
    for s in seeds:
        for i, item in enumerate(items):
            torch.manual_seed(1000 * s + i)
            model = SentenceTransformer(str(folder / "model"), device=device).float()
            tokenize = getattr(model, "preprocess", None) or model.tokenize

            def embed(texts: list[str], model=model, tokenize=tokenize) -> np.ndarray:  # noqa: ANN001
                model.eval()
                parts = []
                with torch.no_grad():
                    for b in range(0, len(texts), 128):
                        f = {k: v.to(device) if hasattr(v, "to") else v for k, v in tokenize(texts[b:b + 128]).items()}
                        parts.append(torch.nn.functional.normalize(model(f)["sentence_embedding"], dim=-1).cpu())
                return torch.cat(parts).numpy()

            texts, classes = item["train_texts"], sorted(set(item["train_labels"]))
            y = torch.tensor([classes.index(lab) for lab in item["train_labels"]])
            weight = (len(y) / (len(classes) * torch.bincount(y, minlength=len(classes)).float())).to(device)
            head = torch.nn.Linear(model.get_sentence_embedding_dimension(), len(classes)).to(device)
            opt = torch.optim.AdamW([{"params": model.parameters(), "lr": 5e-5},
                                     {"params": head.parameters(), "lr": 2e-3}], weight_decay=0.01)
            n, epochs = len(texts), 25
            steps = epochs * -(-n // 16)
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda k, steps=steps: min(1.0, (k + 1) / (0.1 * steps)) * max(0.0, (steps - k) / steps))
            order = torch.Generator().manual_seed(1000 * s + i)
            for _ in range(epochs):
                model.train()
                perm = torch.randperm(n, generator=order)
                for b in range(0, n, 16):
                    rows = perm[b:b + 16].tolist()
                    batch = tokenize([texts[j] for j in rows])
                    f = {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items()}
                    e = torch.nn.functional.normalize(model(f)["sentence_embedding"], dim=-1)
                    loss = torch.nn.functional.cross_entropy(head(e) * 20.0, y[rows].to(device), weight=weight)
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    sched.step()
            result[f"{s}_{i}_tr"] = embed(texts).astype(np.float16)
            result[f"{s}_{i}_te"] = embed(item["test_texts"]).astype(np.float16)
            print(f"seed {s} item {i}: last loss {float(loss):.3f}, {time.perf_counter() - started:.0f} s", flush=True)
    np.savez_compressed(out, **result)


def _lr_proba(train_v, texts, labels, test_v, test_texts):  # noqa: ANN001, ANN202
    from scipy.sparse import csr_matrix, hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2).fit(texts)
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2).fit(texts)

    def features(v, t):  # noqa: ANN001, ANN202
        return hstack([csr_matrix(v), words.transform(t), chars.transform(t)]).tocsr()

    model = LogisticRegression(C=4, max_iter=3000, class_weight="balanced").fit(features(train_v, texts), labels)
    return model.classes_, model.predict_proba(features(test_v, test_texts))


def _predictions(items, vectors, tuned, seeds):  # noqa: ANN001, ANN202
    """Per item: labels predicted by the frozen model, and by the average with the tuned one (None without)."""
    out = []
    for i, it in enumerate(items):
        classes, frozen = _lr_proba(vectors(it["train_texts"]), it["train_texts"], it["train_labels"],
                                    vectors(it["test_texts"]), it["test_texts"])
        mixed = None
        if seeds:
            parts = []
            for s in seeds:
                c, p = _lr_proba(tuned[f"{s}_{i}_tr"].astype(np.float32), it["train_texts"], it["train_labels"],
                                 tuned[f"{s}_{i}_te"].astype(np.float32), it["test_texts"])
                assert list(c) == list(classes)
                parts.append(p)
            mixed = classes[(0.5 * frozen + 0.5 * np.mean(parts, axis=0)).argmax(axis=1)]
        out.append((classes[frozen.argmax(axis=1)], mixed))
    return out


def score(folder: Path, cv_files: list[Path], heldout_file: Path | None) -> None:
    from sklearn.metrics import adjusted_rand_score
    from trail_label_cv import Vectors

    canon, vectors = _canon(), Vectors("all-MiniLM-L6-v2", folder)

    def acc_ari(pred, truth) -> tuple[float, float]:  # noqa: ANN001
        p, t = np.array([canon(x) for x in pred], object), np.array(truth, object)
        return float((p == t).mean()), float(adjusted_rand_score(t, p))

    if cv_files:
        folds = json.loads((folder / "cv.json").read_text())
        tuned = {k: z[k] for f in cv_files for z in [np.load(f)] for k in z.files}
        seeds = sorted({int(k.split("_")[0]) for k in tuned})
        print("| cross-validation inside a half | accuracy, half 0 | ARI, half 0 | accuracy, half 1 | ARI, half 1 |")
        print("|---|---|---|---|---|")
        for name, use in [("frozen (the shipped model)", None), *[(f"+ fine-tuned, seed {s}", [s]) for s in seeds],
                          *([(f"+ fine-tuned, seeds {seeds} averaged", seeds)] if len(seeds) > 1 else [])]:
            got = _predictions(folds, vectors, tuned, use or [])
            cells = []
            for h in (0, 1):
                per_rep = []
                for rep in (0, 1):
                    idx = [i for i, f in enumerate(folds) if f["half"] == h and f["rep"] == rep]
                    pred = [x for i in idx for x in (got[i][1] if use else got[i][0])]
                    per_rep.append(acc_ari(pred, [x for i in idx for x in folds[i]["truth"]]))
                cells += [f"{np.mean([a for a, _ in per_rep]):.3f}", f"{np.mean([r for _, r in per_rep]):.3f}"]
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    if heldout_file:
        items = json.loads((folder / "heldout.json").read_text())
        tuned = dict(np.load(heldout_file))
        seeds = sorted({int(k.split("_")[0]) for k in tuned})
        print("\n| held out (every statement assigned) | " + " | ".join(
            f"accuracy, {it['half']} | ARI, {it['half']}" for it in items) + " |")
        print("|---" * (1 + 2 * len(items)) + "|")
        for name, use in [("frozen (the shipped model)", None), *[(f"+ fine-tuned, seed {s}", [s]) for s in seeds],
                          (f"+ fine-tuned, seeds {seeds} averaged", seeds)]:
            got = _predictions(items, vectors, tuned, use or [])
            cells = [f"{v:.3f}" for i, it in enumerate(items)
                     for v in acc_ari(got[i][1] if use else got[i][0], it["truth"])]
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("folder", type=Path)
    t = sub.add_parser("tune")
    t.add_argument("folder", type=Path)
    t.add_argument("which", choices=["cv", "heldout"])
    t.add_argument("seeds", help="comma-separated, e.g. 0,1,2")
    t.add_argument("out", type=Path)
    s = sub.add_parser("score")
    s.add_argument("folder", type=Path)
    s.add_argument("--cv", type=Path, nargs="*", default=[])
    s.add_argument("--heldout", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.command == "prepare":
        prepare(args.folder)
    elif args.command == "tune":
        tune(args.folder, args.which, [int(x) for x in args.seeds.split(",")], args.out)
    else:
        score(args.folder, args.cv, args.heldout)


if __name__ == "__main__":
    main()

"""Tune mode of benchmarks/quality_trail.py (`--tune`): does `failatlas embed tune` help on held-out statements?

For each direction of TRAIL GAIA's trace-disjoint halves (trace id parity): the train half's labelled statements
(one row per annotated error, as `--examples` in the JSONL format) tune all-MiniLM-L6-v2 through
`failatlas.embed.tune.tune` (the product's function, its defaults unless `--tune-steps`); then on the test half's
distinct statements, with the base vectors and with the tuned ones:

- the shipped label model (`taxonomy.learned.LabelModel`: LR on embedding + TF-IDF, temperature-calibrated)
  trained on the train half, every test statement assigned: accuracy and ARI against the majority human label;
- logistic regression on the embedding alone (the part of the model the tune changes);
- k-means with k = number of labels on the test vectors alone (unsupervised): ARI.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def run_tune_benchmark(args, qt) -> dict[str, Any]:  # noqa: ANN001
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import adjusted_rand_score

    from failatlas.embed import get_embedder
    from failatlas.embed.tune import TuneParams, tune
    from failatlas.store import open_store
    from failatlas.taxonomy.learned import LabelModel

    data = qt.read_trail(args.data)
    work = Path(tempfile.mkdtemp(prefix="quality_tune_"))
    rows = [r for r in data.rows if r["description"] is not None]
    base = get_embedder(args.model, device="cpu")
    out: list[dict[str, Any]] = []
    for train, test in ((0, 1), (1, 0)):
        tr = [r for r in rows if qt.trace_half(r["trace_id"]) == train]
        te_votes: dict[str, dict[str, int]] = {}
        for r in rows:
            if qt.trace_half(r["trace_id"]) == test:
                votes = te_votes.setdefault(r["description"], {})
                votes[r["category"]] = votes.get(r["category"], 0) + 1
        te_texts = sorted(te_votes)
        truth = np.array([min(v, key=lambda lab, v=v: (-v[lab], lab)) for v in map(te_votes.get, te_texts)],
                         dtype=object)
        examples = work / f"half{train}.jsonl"
        examples.write_text("".join(json.dumps({"text": r["description"], "label": r["category"]}) + "\n"
                                    for r in tr))
        store = open_store(work / f"tune{train}.duckdb")
        params = TuneParams(folder=str(work / f"tuned{train}"), base_model=args.model, examples=[str(examples)],
                            use_labels=False, seed=args.seed, device="cpu",
                            **({"max_steps": args.tune_steps, "epochs": 20} if args.tune_steps else {}))
        started = time.perf_counter()
        result = tune(store, params, progress=lambda s, n, loss: print(f"  step {s}/{n} loss {loss:.3f}",
                                                                       file=sys.stderr) if s % 10 == 0 else None)
        tune_seconds = time.perf_counter() - started
        tuned = get_embedder(result.folder, device="cpu")
        tr_texts, tr_labels = [r["description"] for r in tr], [r["category"] for r in tr]
        for name, embedder in (("base", base), ("tuned", tuned)):
            X, Z = embedder.encode(tr_texts), embedder.encode(te_texts)
            model = LabelModel().fit(X, tr_texts, tr_labels)
            shipped = model.classes_[model.predict_proba(Z, te_texts).argmax(1)]
            lr = LogisticRegression(C=4, max_iter=3000).fit(X, tr_labels).predict(Z)
            k = len(set(truth))
            km = [adjusted_rand_score(truth, KMeans(k, n_init=10, random_state=s).fit_predict(Z)) for s in range(3)]
            row = {"direction": f"tune on half {train} -> test half {test}", "encoder": name,
                   "n_train_rows": len(tr), "n_test": len(te_texts),
                   "accuracy_shipped": float((shipped == truth).mean()),
                   "ari_shipped": float(adjusted_rand_score(truth, shipped)),
                   "accuracy_lr_embedding": float((lr == truth).mean()),
                   "ari_lr_embedding": float(adjusted_rand_score(truth, lr)),
                   "ari_kmeans": float(np.mean(km)), "steps": result.steps if name == "tuned" else None,
                   "tune_seconds": tune_seconds if name == "tuned" else None}
            out.append(row)
            print(f"  {row['direction']} {name}: acc {row['accuracy_shipped']:.3f} ARI {row['ari_shipped']:.3f}"
                  f" | LR-emb acc {row['accuracy_lr_embedding']:.3f} | k-means ARI {row['ari_kmeans']:.3f}",
                  file=sys.stderr)
    print("| direction | encoder | test statements | accuracy (shipped model) | ARI (shipped model) |"
          " accuracy (LR on embedding) | ARI (LR on embedding) | k-means ARI (3 seeds) | tune steps, seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in out:
        tuned_cell = "-" if r["steps"] is None else f"{r['steps']}, {r['tune_seconds']:.0f}"
        print(f"| {r['direction']} | {r['encoder']} | {r['n_test']} | {r['accuracy_shipped']:.3f} |"
              f" {r['ari_shipped']:.3f} | {r['accuracy_lr_embedding']:.3f} | {r['ari_lr_embedding']:.3f} |"
              f" {r['ari_kmeans']:.3f} | {tuned_cell} |")
    shutil.rmtree(work, ignore_errors=True)
    return {"tune": out}

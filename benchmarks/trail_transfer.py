"""Transfer mode of benchmarks/quality_trail.py (`--transfer`): learn on one split, evaluate on another.

Only TRAIL's GAIA split is on this machine, so the two splits are its trace-disjoint halves (trace id parity), in
both directions. For each direction the store being mined holds only the test half's statements; the train half
reaches the build only as `--examples` (written in the data's own format: the filtered TRAIL JSONL, or a folder of
the half's annotation files), exactly as a user would run
`taxonomy build --seed trail --examples trail_errors_gaia.jsonl` on a store of unseen statements. Rows:

- unsupervised: the default clustering (`cluster run --reassign-outliers`) scored as it is;
- `--seed trail` (prototypes, no examples): the shipped seeded build;
- `--seed trail --examples TRAIN`: the learned assignment (calibrated probability >= 0.2, the rest clustered);
- the same with `--label-threshold 0` (every statement to a learned category) and without `--seed`;
- classifiers compared on the same vectors (how the learned assignment's model was chosen): nearest prototypes,
  k-NN, logistic regression with and without balanced classes, LR + prototypes, and the shipped model;
- user labels: on a store holding both halves, 30 statements of the train half labelled with `failatlas label`'s
  function (their human label), then `--seed trail` rebuilt; ARI over the test half's statements only, against
  the same build without labels (3 draws of 30).

ARI / NMI over distinct statements of the test half (majority human label; unassigned statements one group);
seed-assignment accuracy = share of the statements in seed (learned) categories whose label is that category.
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

from failatlas.cluster import ClusterParams
from failatlas.cluster import run as run_cluster
from failatlas.cluster.metrics import quality_metrics
from failatlas.embed import DEFAULT_MODEL as DEFAULT_MODEL_NAME
from failatlas.embed import EmbedParams, get_embedder
from failatlas.embed import run as run_embed
from failatlas.store import Store, open_store
from failatlas.taxonomy import BuildParams, make_labeller
from failatlas.taxonomy import run as build_taxonomy
from failatlas.taxonomy.evaluate import evaluate_taxonomy
from failatlas.taxonomy.labels import label_insights
from failatlas.taxonomy.seeding import load_seed


class CachingEmbedder:
    """The benchmark's embedder: the product's, with every text's vector kept in a file beside the stores, so the
    train half's examples are encoded once across builds and runs (the build itself never stores them)."""

    def __init__(self, model: str, cache: Path) -> None:
        self.inner = get_embedder(model)
        self.model, self.revision = self.inner.model, self.inner.revision
        self.cache = cache
        self.vectors: dict[str, np.ndarray] = {}
        if cache.is_file():
            saved = json.loads(cache.read_text())
            if saved.get("revision") == self.revision:
                self.vectors = {t: np.asarray(v, dtype=np.float32) for t, v in saved["vectors"].items()}

    @property
    def dim(self) -> int:
        return self.inner.dim

    def encode(self, texts, batch_size: int = 64) -> np.ndarray:  # noqa: ANN001
        missing = sorted({t for t in texts if t not in self.vectors})
        if missing:
            for t, v in zip(missing, self.inner.encode(missing, batch_size), strict=True):
                self.vectors[t] = v
            self.cache.write_text(json.dumps({"revision": self.revision,
                                              "vectors": {t: v.tolist() for t, v in self.vectors.items()}}))
        return np.stack([self.vectors[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


def write_half(data, half: int, out: Path, trace_half) -> Path:  # noqa: ANN001
    """The train half in the data's own format: the JSONL's lines of that half's traces, or a folder linking the
    half's annotation files."""
    if data.path.is_dir() or data.path.suffix.lower() == ".json":
        folder = out / f"annotations_half{half}"
        folder.mkdir(parents=True, exist_ok=True)
        for name in sorted({r["source_file"] for r in data.rows if trace_half(r["trace_id"]) == half}):
            target = folder / name
            if not target.exists():
                target.symlink_to((data.path if data.path.is_dir() else data.path.parent) / name)
        return folder
    path = out / f"trail_half{half}.jsonl"
    lines = [line for line in data.path.read_text(encoding="utf-8").splitlines()
             if line.strip() and trace_half(json.loads(line)["trace_id"]) == half]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _types_of(store: Store, taxonomy_id: str, ids: list[str]) -> np.ndarray:
    rows = dict(store.query("SELECT insight_id, failure_type_id FROM insight_failure_types WHERE taxonomy_id = ?",
                            [taxonomy_id]))
    names = {t: k for k, t in enumerate(sorted({v for v in rows.values() if v != "unassigned"}))}
    return np.array([names.get(rows.get(i, "unassigned"), -1) for i in ids])


def _score(store: Store, tax, ids: list[str], labels: list[str], embedder, started: float) -> dict[str, Any]:  # noqa: ANN001
    quality = evaluate_taxonomy(store, tax.id, embedder=embedder)
    m = quality_metrics(labels, _types_of(store, tax.id, ids))
    acc = quality.get("seed_accuracy") or {}
    coverage = [r.coverage for r in tax.seed_reports]
    return {"ari": m["ari"], "nmi": m["nmi"], "n_types": len(tax.types), "accuracy": acc.get("accuracy"),
            "accuracy_all": acc.get("accuracy_all"), "coverage": coverage[0] if coverage else None,
            "name_fidelity": quality["name_fidelity"], "seconds": time.perf_counter() - started}


def run_transfer(args, qt) -> dict[str, Any]:  # noqa: ANN001
    """Both directions of the halves' transfer and the user-label rows; prints Markdown tables."""
    data = qt.read_trail(args.data)
    work = args.db.parent if args.db else Path(tempfile.mkdtemp(prefix="quality_transfer_"))
    work.mkdir(parents=True, exist_ok=True)
    embedder = CachingEmbedder(args.model, work / "encode_cache.json")
    trail = load_seed("trail")
    rows: list[dict[str, Any]] = []
    seeds = list(range(args.seed, args.seed + args.seeds))

    def store_of(name: str, half: int | None) -> tuple[Store, list[str], list[str]]:
        store = open_store(work / f"{name}.duckdb")
        if not store.query("SELECT 1 FROM insights LIMIT 1"):
            qt.load_trail(store, args.data, args.text, half, empty_description=args.empty_description, data=data)
        run_embed(store, EmbedParams(model=args.model, normalise="none"))
        ids = [r[0] for r in store.query("SELECT id FROM insights ORDER BY id")]
        return store, ids, qt.majority_label(store, ids)

    def build(store, clustering, **kw):  # noqa: ANN001, ANN202
        params = BuildParams(clustering_ids=[clustering], **kw)
        return build_taxonomy(store, params, labeller=make_labeller("offline"), embedder=embedder)

    for train, test in ((0, 1), (1, 0)):
        store, ids, labels = store_of(f"half{test}", test)
        examples = str(write_half(data, train, work, qt.trace_half))
        variants = [
            ("--seed trail (prototypes, no examples)", {"seed_taxonomy": trail}),
            ("--seed trail --examples TRAIN (learned, threshold 0.2)", {"seed_taxonomy": trail,
                                                                       "examples": [examples]}),
            ("--seed trail --examples TRAIN --label-threshold 0", {"seed_taxonomy": trail, "examples": [examples],
                                                                   "label_threshold": 0.0}),
            ("--examples TRAIN (no seed)", {"examples": [examples]}),
        ]
        per: dict[str, list[dict[str, Any]]] = {}
        for seed in seeds:
            started = time.perf_counter()
            (result,) = run_cluster(store, ClusterParams(all_phases=True, seed=seed, stability_runs=0, map_2d=False,
                                                         reassign_outliers=True, embed_model=args.model)).clusterings
            clusters = dict(store.query("SELECT insight_id, cluster FROM cluster_assignments WHERE clustering_id = ?",
                                        [result.id]))
            m = quality_metrics(labels, np.array([clusters[i] for i in ids]))
            per.setdefault("unsupervised: cluster run --reassign-outliers", []).append(
                {"ari": m["ari"], "nmi": m["nmi"], "n_types": m["n_clusters"],
                 "seconds": time.perf_counter() - started})
            for name, kw in variants:
                started = time.perf_counter()
                tax = build(store, result.id, seed=seed, **kw)
                per.setdefault(name, []).append(_score(store, tax, ids, labels, embedder, started))
        for name, runs in per.items():
            row = {"direction": f"train half {train} -> test half {test}", "method": name, "runs": len(runs),
                   "n_test": len(ids)}
            for key in runs[0]:
                values = [r[key] for r in runs if r[key] is not None]
                row[key] = float(np.mean(values)) if values else None
            row["ari_sd"] = float(np.std([r["ari"] for r in runs]))
            rows.append(row)
            print(f"  {row['direction']}: {name}: ARI {row['ari']:.3f} NMI {row['nmi']:.3f}", file=sys.stderr)

    label_rows = user_label_rows(store_of, build, embedder, qt, seeds, args.user_labels)
    models = model_rows(store_of, qt)
    print_tables(rows, label_rows, models)
    if not args.db:
        shutil.rmtree(work, ignore_errors=True)
    return {"transfer": rows, "user_labels": label_rows, "models": models}


def user_label_rows(store_of, build, embedder, qt, seeds: list[int], n_labels: int) -> list[dict[str, Any]]:  # noqa: ANN001
    """On a store of both halves: `n_labels` statements of one half labelled by a person (their human label, as
    `failatlas label` stores it), `--seed trail` rebuilt; ARI over the other half's statements, with and without
    the labels, 3 draws per direction."""
    store, ids, labels = store_of("both", None)
    half_of = dict(store.query("SELECT insight_id, min(task_id) FROM insight_sources GROUP BY insight_id"))
    trail = load_seed("trail")
    (clustering,) = run_cluster(store, ClusterParams(all_phases=True, seed=seeds[0], stability_runs=0, map_2d=False,
                                                     reassign_outliers=True)).clusterings
    out = []
    for train in (0, 1):
        test_rows = [k for k, i in enumerate(ids) if qt.trace_half(half_of[i]) != train]
        pool = [k for k, i in enumerate(ids) if qt.trace_half(half_of[i]) == train]
        truth = [labels[k] for k in test_rows]
        scores: dict[str, list[float]] = {"without labels": [], f"with {n_labels} labels": []}
        for draw in range(3):
            with store.write() as conn:
                conn.execute("DELETE FROM insight_labels")
            tax = build(store, clustering.id, seed_taxonomy=trail, seed=draw)
            scores["without labels"].append(quality_metrics(truth, _types_of(store, tax.id, ids)[test_rows])["ari"])
            chosen = np.random.default_rng(draw).choice(pool, size=min(n_labels, len(pool)), replace=False)
            for k in chosen:
                label_insights(store, [ids[k]], labels[k])
            tax = build(store, clustering.id, seed_taxonomy=trail, seed=draw)
            scores[f"with {n_labels} labels"].append(
                quality_metrics(truth, _types_of(store, tax.id, ids)[test_rows])["ari"])
        with store.write() as conn:
            conn.execute("DELETE FROM insight_labels")
        for name, values in scores.items():
            out.append({"direction": f"labels from half {train}, scored on half {1 - train}", "method": name,
                        "ari": float(np.mean(values)), "ari_sd": float(np.std(values)), "n_test": len(test_rows)})
            print(f"  user labels {out[-1]['direction']}: {name}: ARI {out[-1]['ari']:.3f}", file=sys.stderr)
    return out


def model_rows(store_of, qt) -> list[dict[str, Any]]:  # noqa: ANN001
    """How the learned assignment's model was chosen: classifiers trained on one half's rows (one per annotated
    error, its description and label), every test statement assigned (no threshold); accuracy, ARI, NMI and the
    expected calibration error of the stated confidence (10 bins) on the other half's distinct statements."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
    from sklearn.neighbors import KNeighborsClassifier

    from failatlas.embed import find_embedding_set, load_insight_vectors
    from failatlas.taxonomy.learned import LabelModel

    store, ids, labels = store_of("both", None)
    data = load_insight_vectors(store, find_embedding_set(store, model=DEFAULT_MODEL_NAME, normalise="none"))
    row_of = {i: k for k, i in enumerate(data.ids)}
    occurrences = store.query("SELECT insight_id, label, task_id FROM insight_sources ORDER BY source_key")
    majority = dict(zip(ids, labels, strict=True))

    def proto_proba(X, y, Z):  # noqa: ANN001, ANN202
        classes = np.array(sorted(set(y)), dtype=object)
        P = np.stack([X[np.asarray(y, dtype=object) == c].mean(0) for c in classes])
        P /= np.linalg.norm(P, axis=1, keepdims=True)
        s = (Z @ P.T) / 0.05
        e = np.exp(s - s.max(1, keepdims=True))
        return classes, e / e.sum(1, keepdims=True)

    def lr(cw):  # noqa: ANN001, ANN202
        def fit(X, y, Z, texts, test_texts):  # noqa: ANN001, ANN202
            m = LogisticRegression(C=4, class_weight=cw, max_iter=3000).fit(X, y)
            return m.classes_, m.predict_proba(Z)
        return fit

    def knn(X, y, Z, texts, test_texts):  # noqa: ANN001, ANN202
        m = KNeighborsClassifier(5, metric="cosine", weights="distance").fit(X, y)
        return m.classes_, m.predict_proba(Z)

    def blend(X, y, Z, texts, test_texts):  # noqa: ANN001, ANN202
        classes, a = lr(None)(X, y, Z, texts, test_texts)
        _, b = proto_proba(X, y, Z)
        return classes, 0.5 * a + 0.5 * b

    def shipped(X, y, Z, texts, test_texts):  # noqa: ANN001, ANN202
        m = LabelModel().fit(X, texts, y)
        return m.classes_, m.predict_proba(Z, test_texts)

    methods = {
        "nearest prototype (mean of the class's vectors)": lambda X, y, Z, t, tt: proto_proba(X, y, Z),
        "k-NN (5, cosine, distance-weighted)": knn,
        "logistic regression on the embedding (C=4)": lr(None),
        "logistic regression on the embedding, balanced classes": lr("balanced"),
        "LR + prototypes, probabilities averaged": blend,
        "shipped: LabelModel (LR on embedding + TF-IDF of words and characters, balanced, calibrated)": shipped,
    }
    out = []
    for train in (0, 1):
        tr = [(iid, lab) for iid, lab, trace in occurrences if qt.trace_half(trace) == train]
        te = sorted({iid for iid, _, trace in occurrences if qt.trace_half(trace) != train})
        X = data.vectors[[row_of[i] for i, _ in tr]]
        Z = data.vectors[[row_of[i] for i in te]]
        y = [lab for _, lab in tr]
        truth = np.array([majority[i] for i in te], dtype=object)
        texts = [data.texts[row_of[i]] for i, _ in tr]
        test_texts = [data.texts[row_of[i]] for i in te]
        for name, fit in methods.items():
            classes, proba = fit(X, y, Z, texts, test_texts)
            predicted = np.asarray(classes, dtype=object)[proba.argmax(1)]
            right, confidence = predicted == truth, proba.max(1)
            bins = np.minimum((confidence * 10).astype(int), 9)
            ece = sum(abs(confidence[bins == b].mean() - right[bins == b].mean()) * (bins == b).mean()
                      for b in range(10) if (bins == b).any())
            out.append({"direction": f"train half {train} -> test half {1 - train}", "method": name,
                        "accuracy": float(right.mean()), "ari": float(adjusted_rand_score(truth, predicted)),
                        "nmi": float(normalized_mutual_info_score(truth, predicted)), "ece": float(ece)})
    return out


def _cell(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def print_tables(rows: list[dict[str, Any]], label_rows: list[dict[str, Any]], models: list[dict[str, Any]]) -> None:
    print("| direction | classifier (every test statement assigned) | accuracy | ARI | NMI | calibration error |"
          "\n|---|---|---|---|---|---|")
    for r in models:
        print(f"| {r['direction']} | {r['method']} | {r['accuracy']:.3f} | {r['ari']:.3f} | {r['nmi']:.3f} |"
              f" {r['ece']:.3f} |")
    print()
    print("| direction | method | test statements | ARI (± sd) | NMI | seed-assignment accuracy | accuracy over all"
          " labelled | coverage | types | name fidelity | time (s) |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['direction']} | {r['method']} | {r['n_test']} | {r['ari']:.3f} ± {r['ari_sd']:.3f} |"
              f" {r['nmi']:.3f} | {_cell(r.get('accuracy'))} | {_cell(r.get('accuracy_all'))} |"
              f" {_cell(r.get('coverage'))} | {_cell(r.get('n_types'))} | {_cell(r.get('name_fidelity'))} |"
              f" {_cell(r.get('seconds'))} |")
    print("\n| user labels | build | test statements | ARI (± sd over 3 draws) |\n|---|---|---|---|")
    for r in label_rows:
        print(f"| {r['direction']} | `--seed trail`, {r['method']} | {r['n_test']} | {r['ari']:.3f} ±"
              f" {r['ari_sd']:.3f} |")

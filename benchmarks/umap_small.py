"""UMAP below 4,096 points: FailAtlas's numpy implementation vs umap-learn, side by side on the same vectors.

    python benchmarks/umap_small.py [--n 1000,3000] [--seeds 42,43,44,45,46] [--trail] [--cache DIR] [--json OUT]

Vectors: the distinct statements of `benchmarks/corpus.py` at each size (as benchmarks/mining.py makes them) and,
with --trail, TRAIL's GAIA descriptions, embedded once through the embed stage (all-MiniLM-L6-v2) into stores
under --cache (kept between runs). For each seed both reducers run with the cluster stage's adaptive parameters,
then the same HDBSCAN; ARI is per statement against the corpus kinds (TRAIL: the annotators' categories), outliers
as one group, as in mining.py. Times are the reducer's fit alone in this process, umap-learn's with its numba code
already compiled (a first fit compiles before this table starts); first use is measured by mining.py.
Prints a Markdown table and the per-reducer mean ARI with its standard deviation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def corpus_vectors(n: int, cache: Path) -> tuple[np.ndarray, list[str], list[str], list[str]]:
    """(vectors of the distinct texts, those texts, every statement, its label)."""
    import pyarrow as pa
    from corpus import generate

    from failatlas.embed import EmbedParams, find_embedding_set, load_insight_vectors
    from failatlas.embed import run as run_embed
    from failatlas.store import open_store

    texts, labels = generate(n, 0)
    store = open_store(cache / f"corpus_{n}.duckdb")
    if not store.query("SELECT count(*) FROM insights")[0][0]:
        counts: dict[str, int] = {}
        for t in texts:
            counts[t] = counts.get(t, 0) + 1
        rows = pa.table({  # noqa: F841 - read by the INSERT below (DuckDB's replacement scan)
            "id": [hashlib.sha256(f"other\x1f{t}".encode()).hexdigest()[:16] for t in counts],
            "text": list(counts), "n": list(counts.values())})
        with store.write() as conn:
            conn.execute("INSERT INTO insights (id, phase, text, n_occurrences) SELECT id, 'other', text, n FROM rows")
        run_embed(store, EmbedParams())
    iv = load_insight_vectors(store, find_embedding_set(store))
    return np.asarray(iv.vectors, dtype=np.float32), list(iv.texts), texts, labels


def trail_vectors(cache: Path) -> tuple[np.ndarray, list[str], list[str], list[str]]:
    from quality_trail import DEFAULT_DATA, load_trail

    from failatlas.embed import EmbedParams, find_embedding_set, load_insight_vectors
    from failatlas.embed import run as run_embed
    from failatlas.store import open_store

    store = open_store(cache / "trail.duckdb")
    if not store.query("SELECT count(*) FROM insights")[0][0]:
        load_trail(store, DEFAULT_DATA)
        run_embed(store, EmbedParams())
    iv = load_insight_vectors(store, find_embedding_set(store))
    votes = dict(store.query(
        "SELECT insight_id, label FROM (SELECT insight_id, label, row_number() OVER (PARTITION BY insight_id"
        " ORDER BY count(*) DESC, label) AS r FROM insight_sources WHERE label IS NOT NULL"
        " GROUP BY insight_id, label) WHERE r = 1"))
    labels = [votes.get(i, "") for i in iv.ids]
    return np.asarray(iv.vectors, dtype=np.float32), list(iv.texts), list(iv.texts), labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1000,3000")
    ap.add_argument("--seeds", default="42,43,44,45,46")
    ap.add_argument("--trail", action="store_true", help="also TRAIL's GAIA descriptions (the shared data)")
    ap.add_argument("--cache", type=Path, default=None, help="folder for the embedded stores (default: temporary)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import umap
    from sklearn.metrics import adjusted_rand_score

    from failatlas.cluster import ClusterParams
    from failatlas.cluster.components import make_clusterer
    from failatlas.cluster.jit import enable_numba_cache
    from failatlas.cluster.umap_numpy import NumpyUMAP

    cache = args.cache or Path(tempfile.mkdtemp(prefix="umap-small-"))
    cache.mkdir(parents=True, exist_ok=True)
    enable_numba_cache()
    sets = [(f"corpus {n}", lambda n=n: corpus_vectors(n, cache)) for n in map(int, args.n.split(","))]
    if args.trail:
        sets.append(("TRAIL GAIA", lambda: trail_vectors(cache)))
    seeds = [int(s) for s in args.seeds.split(",")]
    umap.UMAP(n_neighbors=5, random_state=0).fit_transform(np.random.default_rng(0).normal(size=(60, 8)))  # compile
    out: list[dict] = []
    print("| data (distinct texts) | reducer | fit time, median (s) | ARI per seed | mean ARI (sd) |")
    print("|---|---|---|---|---|")
    for name, load in sets:
        X, distinct, statements, labels = load()
        row_of = {t: i for i, t in enumerate(distinct)}
        params = ClusterParams(all_phases=True, stability_runs=0)
        rp, cp = params.reducer_params(len(X)), params.clusterer_params(len(X))
        for reducer_name, reducer in (("umap-learn (compiled)", umap.UMAP), ("FailAtlas NumpyUMAP", NumpyUMAP)):
            aris, times = [], []
            for seed in seeds:
                tick = time.perf_counter()
                reduced = reducer(**{**rp, "random_state": seed}).fit_transform(X)
                times.append(time.perf_counter() - tick)
                found = make_clusterer("hdbscan", **cp).fit_predict(reduced)
                aris.append(float(adjusted_rand_score(labels, [int(found[row_of[t]]) for t in statements])))
            mean, sd = statistics.mean(aris), statistics.pstdev(aris)
            print(f"| {name} ({len(X)}) | {reducer_name} | {statistics.median(times):.1f} | "
                  f"{', '.join(f'{a:.3f}' for a in aris)} | **{mean:.3f}** ({sd:.3f}) |", flush=True)
            out.append({"data": name, "n": len(X), "reducer": reducer_name, "seeds": seeds, "ari": aris,
                        "seconds": times})
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""30 user labels on TRAIL GAIA: does a `taxonomy build --seed trail` rebuild agree better with the held-back half?

    python benchmarks/user_labels_gaia.py --choice spread|random [--draws 4] [--n 30] [--db PATH]

Store (kept at --db between runs): `ingest file` of all GAIA, `embed run` (CPU), `cluster run --all-phases --seed 0
--reassign-outliers`. Per direction (labels from half 0 or 1, trace id parity) and draw: the labels cleared, the
`--n` statements chosen from the labelled half labelled with their majority human label (`failatlas label`'s
function), the taxonomy rebuilt; ARI over the other half's statements against the build without labels.
`random`: drawn uniformly; `spread`: one statement per category, most frequent category first, round after round
(the order of statements within a category drawn per draw). tests/taxonomy/test_user_labels_gaia.py runs one
spread choice (texts in hash order) through the CLI.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import numpy as np

from failatlas.cluster import ClusterParams
from failatlas.cluster import run as run_cluster
from failatlas.cluster.metrics import quality_metrics
from failatlas.embed import EmbedParams
from failatlas.embed import run as embed
from failatlas.ingest import FileIngestParams, run_file
from failatlas.store import open_store
from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labels import label_insights
from failatlas.taxonomy.seeding import load_seed

ROOT = Path(__file__).resolve().parents[1]
DATA = (Path(os.environ.get("FAILATLAS_SHARED_DATA") or ROOT.parent / "shared" / "data")
        / "trail" / "trail_errors_gaia.jsonl")


def half(trace_id: str) -> int:
    try:
        return int(trace_id, 16) % 2
    except ValueError:
        return hashlib.sha256(trace_id.encode()).digest()[-1] % 2


def pick(pool: list[str], truth: dict, n: int, how: str, draw: int) -> list[str]:
    rng = np.random.default_rng(draw)
    if how == "random":
        return list(rng.choice(pool, size=n, replace=False))
    by: dict[str, list[str]] = {}
    for i in rng.permutation(pool):
        by.setdefault(truth[i][0], []).append(i)
    order = sorted(by, key=lambda lab: (-len(by[lab]), lab))
    out: list[str] = []
    while len(out) < n:
        for lab in order:
            if by[lab] and len(out) < n:
                out.append(by[lab].pop())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--choice", choices=("spread", "random"), default="spread")
    ap.add_argument("--draws", type=int, default=4)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--db", type=Path, default=Path("/tmp/user_labels_gaia.duckdb"))
    args = ap.parse_args()
    fresh = not args.db.exists()
    store = open_store(args.db)
    if fresh:
        run_file(store, FileIngestParams(paths=[DATA]))
        embed(store, EmbedParams(device="cpu"))
        run_cluster(store, ClusterParams(all_phases=True, seed=0, stability_runs=0, map_2d=False,
                                         reassign_outliers=True))
    clustering = store.query("SELECT id FROM clusterings ORDER BY created_at DESC LIMIT 1")[0][0]
    truth: dict[str, tuple[str, str]] = {}
    for iid, lab, trace in store.query(
            "SELECT insight_id, label, min(task_id) FROM insight_sources GROUP BY insight_id, label"
            " ORDER BY insight_id, count(*) DESC, label"):
        truth.setdefault(iid, (lab, trace))
    ids = sorted(truth)
    trail = load_seed("trail")

    def ari(taxonomy_id: str, test: list[str]) -> float:
        types = dict(store.query("SELECT insight_id, failure_type_id FROM insight_failure_types"
                                 " WHERE taxonomy_id = ?", [taxonomy_id]))
        codes = {t: k for k, t in enumerate(sorted(set(types.values())))}
        return quality_metrics([truth[i][0] for i in test], [codes[types[i]] for i in test])["ari"]

    deltas = []
    for train in (0, 1):
        pool = [i for i in ids if half(truth[i][1]) == train]
        test = [i for i in ids if half(truth[i][1]) != train]
        with store.write() as conn:
            conn.execute("DELETE FROM insight_labels")
        before = ari(build(store, BuildParams(clustering_ids=[clustering], seed_taxonomy=trail)).id, test)
        for draw in range(args.draws):
            with store.write() as conn:
                conn.execute("DELETE FROM insight_labels")
            for i in pick(pool, truth, args.n, args.choice, draw):
                label_insights(store, [i], truth[i][0])
            after = ari(build(store, BuildParams(clustering_ids=[clustering], seed_taxonomy=trail, seed=draw)).id,
                        test)
            deltas.append(after - before)
            print(f"labels from half {train}, draw {draw}: ARI {before:.3f} -> {after:.3f} ({after - before:+.3f})",
                  flush=True)
    with store.write() as conn:
        conn.execute("DELETE FROM insight_labels")
    print(f"{args.choice}: mean rise {np.mean(deltas):+.3f}, worst {min(deltas):+.3f}")


if __name__ == "__main__":
    main()

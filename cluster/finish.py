"""The parts of a clustering that `cluster.run` leaves for later: the 2-D map and the stability re-runs.

Both need UMAP fits of their own and change no cluster, so a run that only needs the clusters and their names
(embed -> reduce -> cluster -> name) does not wait for them. `finish` computes what a clustering still lacks
from its recorded parameters (`clusterings.params`) and the same vectors, with the same seeds, so the result is
what `run(..., extras="now")` stores (tested); `map_coordinates` computes the map without writing, for readers
such as the app that must not write.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from failatlas.cluster.pipeline import ClusterPipeline
from failatlas.cluster.reductions import StoreReductionCache
from failatlas.cluster.side import SideWorker, default_workers
from failatlas.cluster.stability import plan_reruns, score_reruns, start_reruns
from failatlas.cluster.stage import pipeline_of
from failatlas.cluster.writes import write_extras
from failatlas.core.errors import NotFoundError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store
from failatlas.embed import load_insight_vectors


class FinishParams(BaseModel):
    """Which clusterings to finish (None: every one with something pending) and what to compute."""

    clustering_ids: list[str] | None = None
    map_2d: bool = True
    stability: bool = True
    workers: int | None = None  # 2: the stability re-runs in a second process while the map runs here


class FinishedClustering(BaseModel):
    id: str
    computed: list[str]  # "map", "stability"
    stability_ari: float | None
    seconds: float


class FinishResult(BaseModel):
    clusterings: list[FinishedClustering]
    seconds: float
    stage_run_id: str


def pending(store: Store, clustering_id: str | None = None) -> dict[str, list[str]]:
    """{clustering id: what it lacks ("map", "stability")} over the clusterings (or the one) that lack something:
    a map when its parameters ask for one and some insight has no coordinates, stability scores when they ask
    for re-runs and none are stored."""
    rows = _rows(store, [clustering_id] if clustering_id else None)
    return {r["id"]: r["pending"] for r in rows if r["pending"]}


def _rows(store: Store, ids: list[str] | None) -> list[dict[str, Any]]:
    sql = """
        SELECT c.id, c.phase, c.embedding_set_id, c.params, c.stability IS NOT NULL AS has_stability,
               EXISTS (SELECT 1 FROM cluster_assignments a WHERE a.clustering_id = c.id AND a.x IS NULL) AS no_map
        FROM clusterings c"""
    args: list = []
    if ids is not None:
        sql += " WHERE c.id IN (SELECT unnest(?))"
        args.append(ids)
    rows = store.query_dicts(sql + " ORDER BY c.id", args)
    found = {r["id"] for r in rows}
    missing = [i for i in ids or [] if i not in found]
    if missing:
        raise NotFoundError(f"no clustering {missing[0]!r}", hint="see `failatlas cluster list`")
    for r in rows:
        r["params"] = json.loads(r["params"])
        r["pending"] = [name for name, lacks in (
            ("map", r["params"].get("map_2d", True) and r["no_map"]),
            ("stability", r["params"].get("stability_runs", 0) > 0 and not r["has_stability"]),
        ) if lacks]
    return rows


def _inputs(store: Store, row: dict[str, Any]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(insight ids, vectors, stored labels) of a clustering, in insight id order as the run had them."""
    assigned = store.query(
        "SELECT insight_id, cluster FROM cluster_assignments WHERE clustering_id = ? ORDER BY insight_id",
        [row["id"]],
    )
    if row["embedding_set_id"] is None:
        raise NotFoundError(f"clustering {row['id']} records no embedding set", hint="run `failatlas cluster run`")
    data = load_insight_vectors(store, row["embedding_set_id"], phases=None if row["phase"] is None else
                                [row["phase"]])
    where = {insight_id: i for i, insight_id in enumerate(data.ids)}
    ids = [a[0] for a in assigned]
    gone = [i for i in ids if i not in where]
    if gone:
        raise NotFoundError(
            f"{len(gone)} insights of clustering {row['id']} are no longer in the store (e.g. {gone[0]})",
            hint="cluster again with `failatlas cluster run`",
        )
    vectors = data.vectors[[where[i] for i in ids]]
    return ids, np.ascontiguousarray(vectors, dtype=np.float32), np.array([a[1] for a in assigned], np.int32)


class _ReadOnlyCache(StoreReductionCache):
    """Reads cached reductions, writes none (for readers of a store that must not write)."""

    def put(self, key: str, reducer: str, reduced: np.ndarray) -> None:
        return None


def map_coordinates(store: Store, clustering_id: str) -> tuple[list[str], np.ndarray] | None:
    """(insight ids, n x 2 coordinates) of a clustering's 2-D map: the stored one, else computed as `finish`
    would (from cached UMAP results where the store has them) without writing anything; None for a clustering
    run without a map. Raises NotFoundError for an unknown clustering or when its insights or vectors are gone."""
    (row,) = _rows(store, [clustering_id])
    if not row["params"].get("map_2d", True):
        return None
    if "map" not in row["pending"]:
        stored = store.query("SELECT insight_id, x, y FROM cluster_assignments WHERE clustering_id = ?"
                             " ORDER BY insight_id", [clustering_id])
        return [r[0] for r in stored], np.array([(r[1], r[2]) for r in stored], dtype=np.float64).reshape(-1, 2)
    ids, vectors, _ = _inputs(store, row)
    pipeline = pipeline_of({**row["params"], "map_2d": True}, _ReadOnlyCache(store))
    return ids, pipeline.project(vectors)


def assignments_with_map(store: Store, clustering_ids: list[str], phase: str | None = None) -> pa.Table | None:
    """`cluster_assignments` rows of the clusterings `clustering_ids` (those of `phase` or of all phases when
    given), with the 2-D maps that `cluster run` left for later computed by `map_coordinates` (nothing is
    written); None when none of them has its map pending (read `cluster_assignments` then)."""
    wanted = set(clustering_ids)
    rows = [r for r in _rows(store, None) if r["id"] in wanted and (phase is None or r["phase"] in (None, phase))]
    if not any("map" in r["pending"] for r in rows):
        return None
    tables = []
    for row in rows:
        with store.read() as conn:
            table = conn.sql("SELECT * FROM cluster_assignments WHERE clustering_id = ? ORDER BY insight_id",
                             params=[row["id"]]).to_arrow_table()
        if "map" in row["pending"]:
            found = map_coordinates(store, row["id"])
            if found is not None:
                ids, xy = found
                if table.column("insight_id").to_pylist() != ids:
                    raise NotFoundError(f"the insights of clustering {row['id']} changed while it was read")
                table = table.set_column(table.schema.get_field_index("x"), "x", pa.array(xy[:, 0]))
                table = table.set_column(table.schema.get_field_index("y"), "y", pa.array(xy[:, 1]))
        tables.append(table)
    return pa.concat_tables(tables)


def finish(store: Store, params: FinishParams | None = None) -> FinishResult:
    """Compute and store what clusterings lack (see `pending`): the 2-D map (`cluster_assignments.x/y`) and the
    stability scores (`clusterings.stability_ari`, `stability`), each clustering in one transaction, so an
    interrupted run keeps the ones it finished. Recorded in `stage_runs` as `cluster.finish`.

    Raises NotFoundError for an unknown clustering id or when a clustering's insights or vectors are gone."""
    params = params or FinishParams()
    with stage_run(store, "cluster.finish", params) as record:
        rows = [r for r in _rows(store, params.clustering_ids) if r["pending"]]
        done = []
        for row in rows:
            start = time.perf_counter()
            todo = [p for p in row["pending"] if (p == "map" and params.map_2d) or (p == "stability" and
                                                                                      params.stability)]
            if not todo:
                continue
            ids, vectors, labels = _inputs(store, row)
            xy, stab = _compute(store, row["params"], vectors, labels, todo, params.workers)
            write_extras(store, row["id"], ids if xy is not None else None, xy, stab)
            record.count("clusterings", 1)
            done.append(FinishedClustering(id=row["id"], computed=todo, seconds=round(time.perf_counter() - start, 3),
                                           stability_ari=stab["mean_ari"] if stab else None))
        record.note(clustering_ids=[d.id for d in done])
    return FinishResult(clusterings=done, seconds=record.seconds or 0.0, stage_run_id=record.id)


def _compute(
    store: Store, resolved: dict[str, Any], vectors: np.ndarray, labels: np.ndarray, todo: list[str],
    workers: int | None,
) -> tuple[np.ndarray | None, dict[str, Any] | None]:
    """(map or None, stability or None) for `todo`, from the recorded parameters `resolved`."""
    cache = StoreReductionCache(store) if resolved.get("reuse_reductions", True) else None
    pipeline: ClusterPipeline = pipeline_of(resolved, cache)
    n = vectors.shape[0]
    reruns = []
    if "stability" in todo:
        reruns = plan_reruns(n, pipeline, runs=resolved["stability_runs"],
                             resample_fraction=resolved["resample_fraction"], seed=resolved["seed"],
                             max_items=resolved["stability_max_items"])
    with SideWorker(default_workers(n) if workers is None else workers) as side:
        futures = start_reruns(vectors, reruns, side)  # in the side process while the map runs here
        xy = pipeline.project(vectors) if "map" in todo else None
        stab = score_reruns(reruns, futures, labels, resample_fraction=resolved["resample_fraction"],
                            max_items=resolved["stability_max_items"]) if reruns else None
    return xy, stab

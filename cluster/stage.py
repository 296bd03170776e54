"""The cluster stage over the store: run clusterings, list them, evaluate them against human labels."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from failatlas.cluster.components import CLUSTERERS, REDUCERS
from failatlas.cluster.metrics import quality_metrics
from failatlas.cluster.params import ClusterParams
from failatlas.cluster.pipeline import ClusterPipeline
from failatlas.cluster.reductions import ReductionCache, StoreReductionCache
from failatlas.cluster.side import SideWorker, default_workers
from failatlas.cluster.stability import plan_reruns, reruns_cached, score_reruns, start_reruns
from failatlas.cluster.writes import write_clustering, write_evaluation
from failatlas.core.errors import ConfigError, NotFoundError
from failatlas.core.stages import StageRun, stage_run
from failatlas.core.store import Store
from failatlas.core.version import __version__, code_version
from failatlas.embed import EmbeddingSet, find_embedding_set, get_set, load_insight_vectors

PIPELINE_VERSION = "1"
# What a clustering id hashes besides its parameters and insights: bump PIPELINE_VERSION when the same parameters
# give other labels. (The code version recorded with a clustering is `code_version()`.)
ID_SALT = f"failatlas {__version__} cluster-pipeline {PIPELINE_VERSION}"
# insight_sources columns a clustering may be evaluated against (majority value per insight)
LABEL_COLUMNS = (
    "label",
    "origin",
    "benchmark",
    "agent",
    "model",
    "task_id",
    "paper_id",
    "run_id",
    "source_field",
)


class ClusteringResult(BaseModel):
    """One clustering as written to `clusterings`."""

    id: str
    phase: str | None
    embedding_set_id: str
    n_insights: int
    n_clusters: int
    outlier_rate: float
    n_reassigned: int
    stability_ari: float | None
    params: dict[str, Any]
    seconds: float
    timings: dict[str, float]  # seconds: load, reduce, cluster, map, stability, write
    reductions_reused: int = 0  # UMAP results read from cluster_reductions instead of computed
    # what the run left for `failatlas cluster finish` (or the app) to compute: "map", "stability"
    pending: list[str] = []


class ClusterResult(BaseModel):
    """What one cluster run did: one clustering per phase (or one for `phase` / `all_phases`)."""

    clusterings: list[ClusteringResult]
    embedding_set_id: str
    seconds: float
    stage_run_id: str


def _clustering_id(resolved: dict[str, Any], ids: list[str]) -> str:
    h = hashlib.sha256(json.dumps(resolved, sort_keys=True).encode())
    h.update(ID_SALT.encode())
    h.update("\n".join(ids).encode())
    return "cl-" + h.hexdigest()[:12]


def build_pipeline(params: ClusterParams, n: int, cache: ReductionCache | None = None) -> ClusterPipeline:
    """The pipeline `params` describe for `n` insights (adaptive defaults resolved), reading and writing
    seeded UMAP results through `cache` when given."""
    return pipeline_of(params.resolve(n), cache)


def pipeline_of(resolved: dict[str, Any], cache: ReductionCache | None = None) -> ClusterPipeline:
    """The pipeline of a clustering's recorded parameters (`clusterings.params`, as `ClusterParams.resolve`
    gives them), so that work deferred to a later process fits exactly what the run would have, with the UMAP
    implementation the run used."""
    reducer_params = resolved["reducer_params"]
    if resolved["reducer"] == "umap" and resolved.get("reducer_used") == "umap":  # a recorded clustering
        # the UMAP that made the clustering: recorded from issue 21 on; before, always umap-learn
        reducer_params = {**(reducer_params or {}),
                          "implementation": resolved.get("umap_implementation", "umap-learn")}
    return ClusterPipeline(
        reducer=resolved["reducer"],
        reducer_params=reducer_params,
        clusterer=resolved["clusterer"],
        clusterer_params=resolved["clusterer_params"],
        reassign_outliers=resolved["reassign_outliers"],
        map_2d=resolved["map_2d"],
        random_state=None if resolved["parallel"] else resolved["seed"],
        cache=cache,
    )


def phases_present(store: Store) -> list[str]:
    """The phases that have insights, in name order."""
    return [r[0] for r in store.query("SELECT DISTINCT phase FROM insights ORDER BY phase")]


def resolve_embedding_set(store: Store, params: ClusterParams) -> EmbeddingSet:
    """The embedding set a run clusters: `params.embedding_set_id`, else the set of `params.embed_model` (at the
    revision on this machine) and `params.normalise`. Raises NotFoundError when there is none."""
    if params.embedding_set_id:
        return get_set(store, params.embedding_set_id)
    return find_embedding_set(store, model=params.embed_model, normalise=params.normalise)


def run(store: Store, params: ClusterParams, *, extras: Literal["later", "now"] = "later") -> ClusterResult:
    """Cluster insights from their vectors in one embedding set and write `clusterings` and `cluster_assignments`
    (2-D map included): `params.phase` only, all insights together with `all_phases`, else one clustering per
    phase present in `insights` (the default: kinds of error differ by phase). Re-running with the same
    parameters on the same insights replaces the same clustering id. The run is recorded in `stage_runs`.

    With `reuse_reductions`, seeded UMAP results (the reduction, the 2-D map, the stability re-runs' reductions)
    are read from and written to `cluster_reductions`, keyed by the vectors' content and UMAP's parameters: a
    re-run that changes only the clusterer, or repeats a run, skips UMAP. The result is the same either way.
    `workers` 2 fits the 2-D map and the stability re-runs in a second process while the main reduction runs
    (default: 2 from 4,096 insights on when there are 2 CPUs, cluster/side.py); the result does not depend on it.

    `extras` "later" (the default) leaves the 2-D map and the stability re-runs, which need UMAP fits of their own
    and change no cluster, to `finish` (`failatlas cluster finish`; the app computes a missing map itself) unless
    their UMAP results are cached; "now" computes them in this run. The clustering, its id and its recorded
    parameters are the same either way, and so are the map and the stability scores once computed.

    Raises NotFoundError when there are no insights (in the phase), no embedding set, or some insights were
    never embedded into it."""
    REDUCERS.factory(params.reducer)  # an unknown name is a ConfigError before anything is read
    CLUSTERERS.factory(params.clusterer)
    with stage_run(store, "cluster", params, seed=params.seed) as record:
        if params.phase is not None or params.all_phases:
            phases: list[str | None] = [None if params.all_phases else params.phase]
        else:
            phases = list(phases_present(store))
            if not phases:
                raise NotFoundError("no insights at all", hint="import some with `failatlas ingest`")
        embedding_set = resolve_embedding_set(store, params)
        if extras not in ("later", "now"):
            raise ConfigError(f"extras must be 'later' or 'now', not {extras!r}")
        results = [_cluster(store, params, phase, embedding_set, record, extras == "later") for phase in phases]
        record.note(embedding_set_id=embedding_set.id, clustering_ids=[r.id for r in results])
    return ClusterResult(clusterings=results, embedding_set_id=embedding_set.id, seconds=record.seconds or 0.0,
                         stage_run_id=record.id)


def _cluster(
    store: Store, params: ClusterParams, phase: str | None, embedding_set: EmbeddingSet, record: StageRun,
    defer: bool = False,
) -> ClusteringResult:
    """One clustering of `phase` (None: every insight), written in one transaction; with `defer`, the map and
    the stability re-runs only when their UMAP results are cached (or a tiny phase's PCA map)."""
    params = params.model_copy(update={"phase": phase, "all_phases": phase is None})
    start = time.perf_counter()
    data = load_insight_vectors(store, embedding_set, phases=None if phase is None else [phase])
    n = len(data.ids)
    if n == 0:
        raise NotFoundError(
            f"no insights in phase {phase!r}" if phase else "no insights at all",
            hint="import some with `failatlas ingest`",
        )
    timings = {"load": time.perf_counter() - start}
    cache = StoreReductionCache(store) if params.reuse_reductions else None
    pipeline = build_pipeline(params, n, cache)
    reruns = plan_reruns(n, pipeline, runs=params.stability_runs, resample_fraction=params.resample_fraction,
                         seed=params.seed, max_items=params.stability_max_items)
    pending: list[str] = []
    if defer:
        cached_map = params.map_2d and pipeline.map_in_cache(data.vectors)
        pipeline.map_2d = params.map_2d and (cached_map or not pipeline.needs_umap_map(n))
        if params.map_2d and not pipeline.map_2d:
            pending.append("map")
        if reruns and not reruns_cached(data.vectors, reruns):
            reruns = []
            pending.append("stability")
    workers = default_workers(n) if params.workers is None else params.workers
    with SideWorker(workers if reruns or pipeline.map_2d else 1) as side:
        # the stability re-runs and the 2-D map go to the side process before the main reduction starts here
        futures = start_reruns(data.vectors, reruns, side)
        pipeline.fit(data.vectors, side=side)
        timings.update(pipeline.timings_)
        stab = (
            score_reruns(reruns, futures, pipeline.labels_, resample_fraction=params.resample_fraction,
                         max_items=params.stability_max_items)
            if reruns
            else None
        )
    timings["stability"] = time.perf_counter() - start - sum(timings.values())
    resolved = params.resolve(n)
    resolved["embed_model"] = embedding_set.model
    resolved["embed_revision"] = embedding_set.revision
    resolved["normalisation"] = embedding_set.normalisation
    resolved["reducer_used"] = pipeline.reducer_used_
    if pipeline.umap_implementation_:
        resolved["umap_implementation"] = pipeline.umap_implementation_
    resolved["clusterer_used"] = pipeline.clusterer_used_
    clustering_id = _clustering_id(resolved, data.ids)
    labels = pipeline.labels_
    n_clusters = int(np.unique(labels[labels >= 0]).size)
    outlier_rate = float((labels < 0).mean())
    xy = pipeline.embedding_2d_
    assignments = pa.table(
        {
            "insight_id": pa.array(data.ids),
            "cluster": pa.array(labels.astype(np.int32)),
            "reassigned": pa.array(pipeline.reassigned_),
            "probability": pa.array(pipeline.probabilities_, type=pa.float64())
            if pipeline.probabilities_ is not None
            else pa.nulls(n, pa.float64()),
            "x": pa.array(xy[:, 0]) if xy is not None else pa.nulls(n, pa.float64()),
            "y": pa.array(xy[:, 1]) if xy is not None else pa.nulls(n, pa.float64()),
        }
    )
    write_clustering(store, {
        "id": clustering_id, "phase": phase, "embed_model": embedding_set.model,
        "embedding_set_id": embedding_set.id, "params": resolved, "n_insights": n, "n_clusters": n_clusters,
        "outlier_rate": outlier_rate, "stability_ari": stab["mean_ari"] if stab else None, "stability": stab,
        "code_version": code_version(),
    }, assignments)
    record.count("clusterings", 1)
    record.count("cluster_assignments", n)
    return ClusteringResult(
        id=clustering_id,
        phase=phase,
        embedding_set_id=embedding_set.id,
        n_insights=n,
        n_clusters=n_clusters,
        outlier_rate=outlier_rate,
        n_reassigned=int(pipeline.reassigned_.sum()),
        stability_ari=stab["mean_ari"] if stab else None,
        params=resolved,
        seconds=round(time.perf_counter() - start, 3),
        timings={
            k: round(v, 3)
            for k, v in {**timings, "write": time.perf_counter() - start - sum(timings.values())}.items()
        },
        reductions_reused=cache.hits if cache else 0,
        pending=pending,
    )


def list_clusterings(store: Store) -> list[dict[str, Any]]:
    """Every clustering, newest first."""
    return store.query_dicts(
        "SELECT id, phase, embed_model, embedding_set_id, n_insights, n_clusters, outlier_rate, stability_ari,"
        " created_at FROM clusterings ORDER BY created_at DESC, id"
    )


def latest_clustering_id(store: Store) -> str:
    rows = store.query("SELECT id FROM clusterings ORDER BY created_at DESC, id LIMIT 1")
    if not rows:
        raise NotFoundError("no clustering yet", hint="run `failatlas cluster run` first")
    return rows[0][0]


def majority_labels(
    store: Store, clustering_id: str, label_column: str = "label"
) -> tuple[list[str], list[str], list[int]]:
    """(insight ids, majority `label_column` value, cluster) of the clustered insights that have a value.

    An insight stated by several sources takes the value most of them give; ties go to the alphabetically
    first value, so the choice is deterministic."""
    if label_column not in LABEL_COLUMNS:
        raise ConfigError(
            f"cannot evaluate against {label_column!r}",
            hint=f"choose an insight_sources column: {', '.join(LABEL_COLUMNS)}",
        )
    rows = store.query(
        f"""
        WITH votes AS (
            SELECT insight_id, "{label_column}" AS value, count(*) AS n
            FROM insight_sources WHERE "{label_column}" IS NOT NULL GROUP BY ALL
        ), ranked AS (
            SELECT insight_id, value,
                   row_number() OVER (PARTITION BY insight_id ORDER BY n DESC, value) AS r
            FROM votes
        )
        SELECT a.insight_id, k.value, a.cluster
        FROM cluster_assignments a JOIN ranked k ON k.insight_id = a.insight_id AND k.r = 1
        WHERE a.clustering_id = ? ORDER BY a.insight_id
        """,
        [clustering_id],
    )
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def evaluate_clustering(
    store: Store, clustering_id: str | None = None, label_column: str = "label"
) -> dict[str, Any]:
    """Compare a clustering (the newest when None) with the human labels in `insight_sources.<label_column>`
    and record the metrics in `cluster_evaluations`.

    Raises NotFoundError for an unknown clustering or when none of its insights carries a label."""
    clustering_id = clustering_id or latest_clustering_id(store)
    if not store.query("SELECT 1 FROM clusterings WHERE id = ?", [clustering_id]):
        raise NotFoundError(f"no clustering {clustering_id!r}", hint="see `failatlas cluster list`")
    _, labels, clusters = majority_labels(store, clustering_id, label_column)
    if not labels:
        raise NotFoundError(
            f"no insight of clustering {clustering_id} has a value in insight_sources.{label_column}"
        )
    metrics = quality_metrics(labels, clusters)
    metrics["clustering_id"] = clustering_id
    metrics["label_column"] = label_column
    write_evaluation(store, clustering_id, label_column, metrics)
    return metrics

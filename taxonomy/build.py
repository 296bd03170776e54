"""Building a taxonomy snapshot from clusterings: merge near-duplicate clusters into failure types, name them,
group them into categories per phase, and record every member's type. One function, one transaction."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from dataclasses import dataclass

import numpy as np

from failatlas.core.errors import ConfigError
from failatlas.core.stages import StageRun, stage_run
from failatlas.core.store import Store
from failatlas.core.version import code_version
from failatlas.embed import EmbeddingSet
from failatlas.taxonomy.assign import assign_by_phase
from failatlas.taxonomy.hierarchy import group_centroids
from failatlas.taxonomy.inputs import ClusteringInput, latest_clusterings, load_clustering, normalise, require_vectors
from failatlas.taxonomy.keywords import class_tfidf
from failatlas.taxonomy.labelling import Labeller, make_labeller
from failatlas.taxonomy.merge import merge_groups
from failatlas.taxonomy.model import (
    UNASSIGNED,
    BuildParams,
    CategoryEvidence,
    FailureCategory,
    FailureType,
    Taxonomy,
    TypeEvidence,
    TypeLabel,
    phase_rank,
)
from failatlas.taxonomy.read import load_taxonomy
from failatlas.taxonomy.writes import write_assignments, write_snapshot


@dataclass
class _Draft:
    """A failure type before naming: its members (most central first) and where it came from."""

    phase: str
    insight_ids: list[str]
    texts: list[str]
    similarities: np.ndarray
    centroid: np.ndarray
    keywords: list[str]
    merged_from: list[str]


def _centroid(vectors: np.ndarray) -> np.ndarray:
    return normalise(vectors.mean(axis=0, keepdims=True))[0]


def _drafts(ci: ClusteringInput, vectors: np.ndarray, params: BuildParams) -> tuple[list[_Draft], np.ndarray]:
    """Merged failure-type drafts of one clustering and the row indices of its outliers."""
    labels = ci.members["cluster"].to_numpy()
    texts = ci.members["text"].to_list()
    ids = ci.members["insight_id"].to_list()
    phases = ci.members["phase"].to_list()
    clusters = sorted({int(c) for c in labels if c >= 0})
    outliers = np.flatnonzero(labels < 0)
    if not clusters:
        return [], outliers
    keywords = class_tfidf(texts, labels, top_n=params.n_keywords)
    centroids = np.stack([_centroid(vectors[labels == c]) for c in clusters])
    groups = merge_groups(
        centroids,
        [[t for t, _ in keywords[c]] for c in clusters],
        threshold=params.merge_threshold,
        min_shared_keywords=params.merge_min_shared_keywords,
    )
    merged_labels = np.full(len(labels), -1)
    for g, members in enumerate(groups):
        for m in members:
            merged_labels[labels == clusters[m]] = g
    if len(groups) < len(clusters):
        keywords = class_tfidf(texts, merged_labels, top_n=params.n_keywords)
    else:
        keywords = {g: keywords[clusters[g]] for g in range(len(groups))}
    drafts = []
    for g, members in enumerate(groups):
        rows = np.flatnonzero(merged_labels == g)
        centroid = _centroid(vectors[rows])
        sims = vectors[rows] @ centroid
        order = rows[np.argsort(-sims, kind="stable")]
        phase = ci.phase or Counter(phases[r] for r in rows).most_common(1)[0][0]
        drafts.append(
            _Draft(
                phase=phase,
                insight_ids=[ids[r] for r in order],
                texts=[texts[r] for r in order],
                similarities=np.sort(sims)[::-1].astype(float),
                centroid=centroid,
                keywords=[t for t, _ in keywords[g]],
                merged_from=[f"{ci.id}:{clusters[m]}" for m in members],
            )
        )
    return drafts, outliers


def _evidence(drafts: list[_Draft], type_ids: list[str], n_neighbours: int = 2) -> list[TypeEvidence]:
    """Each draft's evidence, with the nearest other drafts of its phase as contrast."""
    plain = [
        TypeEvidence(
            key=t,
            phase=d.phase,
            insight_ids=d.insight_ids,
            texts=d.texts,
            similarities=d.similarities,
            keywords=d.keywords,
        )
        for t, d in zip(type_ids, drafts, strict=True)
    ]
    if len(drafts) > 1:
        centroids = np.stack([d.centroid for d in drafts])
        sims = centroids @ centroids.T
        for i, ev in enumerate(plain):
            order = [j for j in np.argsort(-sims[i], kind="stable") if j != i][:n_neighbours]
            ev.neighbours = [plain[j] for j in order]
    return plain


def _unique_names(names: list[str], keywords: list[list[str]]) -> list[str]:
    """Make names distinct within a phase by adding a distinguishing keyword (then a number) to repeats."""
    out: list[str] = []
    for name, kws in zip(names, keywords, strict=True):
        candidate = name
        for kw in kws:
            if candidate.lower() not in {o.lower() for o in out}:
                break
            if kw.lower() not in name.lower():
                candidate = f"{name} ({kw})"
        n = 2
        while candidate.lower() in {o.lower() for o in out}:
            candidate, n = f"{name} #{n}", n + 1
        out.append(candidate)
    return out


def _categories(
    phase: str,
    drafts: list[_Draft],
    labels: list[TypeLabel],
    names: list[str],
    labeller: Labeller,
    params: BuildParams,
) -> tuple[list[FailureCategory], list[str]]:
    """The phase's categories, named by `labeller`, and each draft's category id."""
    centroids = np.stack([d.centroid for d in drafts])
    sizes = np.array([len(d.insight_ids) for d in drafts], dtype=float)
    groups = group_centroids(centroids, sizes, max_categories=params.max_categories)
    n_groups = int(groups.max()) + 1
    texts = [t for d in drafts for t in d.texts]
    text_groups = [int(groups[i]) for i, d in enumerate(drafts) for _ in d.texts]
    keywords = class_tfidf(texts, text_groups, top_n=6) if n_groups > 1 else {0: []}
    members = [[i for i in range(len(drafts)) if groups[i] == c] for c in range(n_groups)]
    evidence = [
        CategoryEvidence(
            key=f"{phase}/C{c + 1}",
            phase=phase,
            type_names=[names[i] for i in members[c]],
            type_definitions=[labels[i].definition for i in members[c]],
            keywords=[t for t, _ in keywords[c]] or drafts[members[c][0]].keywords,
            texts=[t for i in members[c] for t in drafts[i].texts],
            other_categories=[[names[i] for i in members[o]] for o in range(n_groups) if o != c],
        )
        for c in range(n_groups)
    ]
    named = [labeller.label_category(ev) for ev in evidence]
    unique = _unique_names([n.name for n in named], [ev.keywords for ev in evidence])
    out = [
        FailureCategory(
            id=ev.key,
            phase=phase,
            name=name,
            definition=lab.definition,
            keywords=ev.keywords,
            naming_method=lab.naming_method,
            prompt=lab.prompt,
            raw_reply=lab.raw_reply,
        )
        for ev, lab, name in zip(evidence, named, unique, strict=True)
    ]
    return out, [f"{phase}/C{int(groups[i]) + 1}" for i in range(len(drafts))]


def run(store: Store, params: BuildParams, *, labeller: Labeller | None = None) -> Taxonomy:
    """Build and store a taxonomy snapshot from `params.clustering_ids` (default: the newest clustering per
    phase), and record the run in `stage_runs`. A snapshot is named by what decides it (the clusterings, the
    parameters, the embedding set and the code version): when that snapshot exists already, it is returned as it
    is, nothing is labelled again and no second snapshot appears (`failatlas demo` re-run). A labeller passed as an
    object always makes a new snapshot, since its identity is not recorded.

    Clusters become failure types (near-duplicates merged), named by `labeller` (default: the one `params`
    names, given the store so that LLM calls are cached and logged), grouped into categories per phase; every
    clustered insight is recorded in `insight_failure_types` (outliers go to the nearest type or 'unassigned').
    Centroids come from the vectors of the embedding set the clusterings were made from. Raises NotFoundError
    when a clustering is missing, InputError when members lack vectors, ConfigError for inconsistent inputs or
    an unusable labeller.
    """
    with stage_run(store, "taxonomy.build", params, seed=params.seed) as record:
        return _build(store, params, labeller, record)


def _build(store: Store, params: BuildParams, labeller: Labeller | None, record: StageRun) -> Taxonomy:
    started = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    clustering_ids = list(params.clustering_ids) if params.clustering_ids else latest_clusterings(store)
    inputs = [load_clustering(store, c) for c in clustering_ids]
    sets = sorted({ci.embedding_set.id for ci in inputs})
    if len(sets) != 1:
        raise ConfigError(
            f"the clusterings use different embedding sets: {sets}",
            hint="build a taxonomy from clusterings of one embedding model, revision and normaliser",
        )
    embedding_set = inputs[0].embedding_set
    phases_seen = [ci.phase for ci in inputs]
    if len(set(phases_seen)) != len(phases_seen):
        raise ConfigError(f"two clusterings cover the same phase: {phases_seen}", hint="pass one per phase")
    key = [clustering_ids, params.model_dump(mode="json", exclude={"clustering_ids"}), embedding_set.id,
           code_version()]
    if labeller is not None:
        key.append(started.isoformat())  # a labeller object's identity is not recorded: always a new snapshot
    taxonomy_id = "tx-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    if store.query("SELECT 1 FROM taxonomies WHERE id = ?", [taxonomy_id]):
        record.note(taxonomy_id=taxonomy_id, reused=True)
        return load_taxonomy(store, taxonomy_id).model_copy(update={"stage_run_id": record.id})
    labeller = labeller or make_labeller(params.labeller, store=store, **params.labeller_args)

    drafts: list[_Draft] = []
    outliers: list[tuple[str, str, np.ndarray]] = []  # (insight_id, phase, vector)
    for ci in inputs:
        vectors = require_vectors(store, ci.members["text"].to_list(), embedding_set, f"insights of {ci.id}")
        found, out_rows = _drafts(ci, vectors, params)
        drafts.extend(found)
        outliers.extend(
            (ci.members["insight_id"][int(r)], ci.members["phase"][int(r)], vectors[r]) for r in out_rows
        )

    types: list[FailureType] = []
    categories: list[FailureCategory] = []
    records: list[tuple[str, str, float | None, str]] = []  # (type id, insight id, cosine, method)
    for phase in sorted({d.phase for d in drafts}, key=lambda p: (phase_rank(p), p)):
        mine = sorted(
            (d for d in drafts if d.phase == phase), key=lambda d: (-len(d.insight_ids), d.merged_from)
        )
        type_ids = [f"{phase}/T{n:02d}" for n in range(1, len(mine) + 1)]
        labels = [labeller.label(ev) for ev in _evidence(mine, type_ids)]
        names = _unique_names([lab.name for lab in labels], [d.keywords for d in mine])
        cats, cat_ids = _categories(phase, mine, labels, names, labeller, params)
        categories.extend(cats)
        rule = (
            f"Closer to this type's centroid than to any other {phase} type's, with cosine at least "
            f"{params.assign_threshold:.2f}."
        )
        for type_id, d, lab, name, cat in zip(type_ids, mine, labels, names, cat_ids, strict=True):
            types.append(
                FailureType(
                    id=type_id,
                    phase=phase,
                    category_id=cat,
                    name=name,
                    definition=lab.definition,
                    inclusion_criteria=[*lab.inclusion_criteria, rule],
                    examples=lab.examples,
                    keywords=d.keywords,
                    centroid=[float(x) for x in d.centroid],
                    n_insights=len(d.insight_ids),
                    merged_from=d.merged_from,
                    naming_method=lab.naming_method,
                    prompt=lab.prompt,
                    raw_reply=lab.raw_reply,
                )
            )
            records += [
                (type_id, i, float(s), "cluster") for i, s in zip(d.insight_ids, d.similarities, strict=True)
            ]

    if outliers:
        by_phase = {}
        for t in types:
            ids, cents = by_phase.setdefault(t.phase, ([], []))
            ids.append(t.id)
            cents.append(t.centroid)
        centroids = {p: (ids, np.asarray(c, dtype=np.float32)) for p, (ids, c) in by_phase.items()}
        out_ids, out_sims = assign_by_phase(
            [o[1] for o in outliers], np.stack([o[2] for o in outliers]), centroids, params.assign_threshold
        )
        records += [
            (
                t,
                o[0],
                None if np.isnan(s) else float(s),
                "nearest_centroid" if t != UNASSIGNED else UNASSIGNED,
            )
            for o, t, s in zip(outliers, out_ids, out_sims, strict=True)
        ]
    return _store_snapshot(store, record, taxonomy_id, clustering_ids, embedding_set, params, started, categories,
                           types, records)


def _store_snapshot(
    store: Store,
    record: StageRun,
    taxonomy_id: str,
    clustering_ids: list[str],
    embedding_set: EmbeddingSet,
    params: BuildParams,
    started: dt.datetime,
    categories: list[FailureCategory],
    types: list[FailureType],
    records: list[tuple[str, str, float | None, str]],
) -> Taxonomy:
    version_code = code_version()
    n_unassigned = sum(1 for r in records if r[0] == UNASSIGNED)
    with store.write() as conn:
        version = write_snapshot(
            conn, taxonomy_id=taxonomy_id, clustering_ids=clustering_ids, embedding_set_id=embedding_set.id,
            embed_model=embedding_set.model, normalisation=embedding_set.normalisation,
            params_json=params.model_dump_json(), code_version=version_code, created_at=started,
            categories=categories, types=types,
        )
        write_assignments(store, [(taxonomy_id, iid, tid, s, m) for tid, iid, s, m in records])
        record.count("taxonomies", 1)
        record.count("failure_categories", len(categories))
        record.count("failure_types", len(types))
        record.count("insight_failure_types", len(records))
        record.note(taxonomy_id=taxonomy_id, version=version, n_assigned=len(records) - n_unassigned,
                    n_unassigned=n_unassigned, embedding_set_id=embedding_set.id)
        record.id = f"taxonomy.build:{taxonomy_id}"  # a build's run is named after its snapshot
        record.record(conn)
    return Taxonomy(
        id=taxonomy_id,
        version=version,
        clustering_ids=clustering_ids,
        embed_model=embedding_set.model,
        normalisation=embedding_set.normalisation,
        embedding_set_id=embedding_set.id,
        params=params,
        code_version=version_code,
        categories=categories,
        types=types,
        n_assigned=len(records) - n_unassigned,
        n_unassigned=n_unassigned,
        stage_run_id=record.id,
    )

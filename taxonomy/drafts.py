"""Failure-type drafts before naming: from a clustering (near-duplicate clusters merged, too-broad ones split by
error signature) or from a seed taxonomy (the seed categories that explain some insights, and the rest)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from failatlas.taxonomy.inputs import ClusteringInput, normalise
from failatlas.taxonomy.keywords import class_tfidf
from failatlas.taxonomy.merge import merge_groups
from failatlas.taxonomy.model import BuildParams, SeedReport
from failatlas.taxonomy.seeding import SeedCategory, assign_to_seed, calibrate_threshold
from failatlas.taxonomy.signatures import split_by_signature


@dataclass
class Draft:
    """A failure type before naming: its members (most central first) and where it came from."""

    phase: str
    insight_ids: list[str]
    texts: list[str]
    similarities: np.ndarray
    centroid: np.ndarray
    keywords: list[str]
    merged_from: list[str]
    origin: str = "cluster"
    seed_category: SeedCategory | None = None
    report: SeedReport | None = None  # a learned category's: how it was learned
    nearest_seed: tuple[str, float] | None = None  # a new type's nearest seed category and the cosine to it


def _centroid(vectors: np.ndarray) -> np.ndarray:
    return normalise(vectors.mean(axis=0, keepdims=True))[0]


def draft_of(
    rows: np.ndarray,
    ids: list[str],
    texts: list[str],
    vectors: np.ndarray,
    phase: str,
    keywords: list[str],
    merged_from: list[str],
    **extra: object,
) -> Draft:
    """The draft of the members at `rows`, ordered by closeness to their centroid."""
    centroid = _centroid(vectors[rows])
    sims = vectors[rows] @ centroid
    order = rows[np.argsort(-sims, kind="stable")]
    return Draft(
        phase=phase,
        insight_ids=[ids[r] for r in order],
        texts=[texts[r] for r in order],
        similarities=np.sort(sims)[::-1].astype(float),
        centroid=centroid,
        keywords=keywords,
        merged_from=merged_from,
        **extra,  # type: ignore[arg-type]
    )


def joined_draft(keep: Draft, other: Draft, vectors: np.ndarray, keywords: list[str]) -> Draft:
    """`keep` with `other`'s members added (`vectors`: the vectors of keep's then other's members, in that order),
    ordered by closeness to their new centroid; `keep`'s origin and seed."""
    ids, texts = [*keep.insight_ids, *other.insight_ids], [*keep.texts, *other.texts]
    return draft_of(np.arange(len(ids)), ids, texts, vectors, keep.phase, keywords,
                    sorted({*keep.merged_from, *other.merged_from}), origin=keep.origin,
                    seed_category=keep.seed_category, report=keep.report, nearest_seed=keep.nearest_seed)


def cluster_drafts(ci: ClusteringInput, vectors: np.ndarray, params: BuildParams) -> tuple[list[Draft], np.ndarray]:
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
    sources: list[list[str]] = []  # per final group, the clusters behind it
    for members in groups:
        rows = np.flatnonzero(np.isin(labels, [clusters[m] for m in members]))
        parts = split_by_signature([texts[r] for r in rows], vectors[rows]) if params.split_signatures else [None]
        for part in parts:
            part = slice(None) if part is None else part
            merged_labels[rows[part]] = len(sources)
            sources.append([f"{ci.id}:{clusters[m]}" for m in members])
    if len(sources) != len(clusters):
        keywords = class_tfidf(texts, merged_labels, top_n=params.n_keywords)
    else:
        keywords = {g: keywords[clusters[g]] for g in range(len(sources))}
    drafts = []
    for g, merged_from in enumerate(sources):
        rows = np.flatnonzero(merged_labels == g)
        phase = ci.phase or Counter(phases[r] for r in rows).most_common(1)[0][0]
        drafts.append(draft_of(rows, ids, texts, vectors, phase, [t for t, _ in keywords[g]], merged_from))
    return drafts, outliers


def seeded_drafts(
    ci: ClusteringInput,
    vectors: np.ndarray,
    params: BuildParams,
    categories: list[SeedCategory],
    protos: np.ndarray,
) -> tuple[list[Draft], ClusteringInput, np.ndarray, SeedReport]:
    """Drafts of the seed categories that explain some of the clustering's insights, the clustering restricted to
    the insights the seed does not explain (clustered into new types), their vectors, and the phase's report."""
    sims = vectors @ protos.T
    threshold = calibrate_threshold(sims, params.seed_null_quantile)
    labels, _ = assign_to_seed(vectors, protos, threshold, refine=params.seed_refine)
    texts = ci.members["text"].to_list()
    ids = ci.members["insight_id"].to_list()
    phase = ci.phase or Counter(ci.members["phase"].to_list()).most_common(1)[0][0]
    covered = labels >= 0
    keywords = class_tfidf(texts, labels, top_n=params.n_keywords) if covered.any() else {}
    drafts = [
        draft_of(
            np.flatnonzero(labels == c), ids, texts, vectors, phase, [t for t, _ in keywords.get(c, [])],
            [f"seed:{categories[c].name}"], origin="seed", seed_category=categories[c],
        )
        for c in sorted({int(x) for x in labels[covered]})
    ]
    rest = np.flatnonzero(~covered)
    uncovered = ClusteringInput(
        id=ci.id, phase=ci.phase, embedding_set=ci.embedding_set, members=ci.members[rest.tolist()]
    )
    report = SeedReport(
        phase=phase,
        n_insights=len(ids),
        n_explained=int(covered.sum()),
        threshold=round(threshold, 4),
        null_quantile=params.seed_null_quantile,
    )
    return drafts, uncovered, vectors[rest], report

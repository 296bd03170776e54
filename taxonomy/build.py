"""Building a taxonomy snapshot from clusterings: merge near-duplicate clusters into failure types, name them,
group them into categories per phase, and record every member's type. One function, one transaction."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from failatlas.taxonomy.assign import assign_by_phase, write_assignments
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

from failatlas.core.errors import ConfigError
from failatlas.core.store import Store
from failatlas.core.version import __version__


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


def code_version() -> str:
    """FailAtlas's version plus the git commit of the code when it runs from a checkout."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev = ""
    return f"failatlas {__version__}" + (f" ({rev})" if rev else "")


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


def build_taxonomy(
    store: Store,
    clustering_ids: list[str] | None = None,
    params: BuildParams | None = None,
    *,
    labeller: Labeller | None = None,
) -> Taxonomy:
    """Build and store a new taxonomy snapshot from `clustering_ids` (default: the newest clustering per
    phase).

    Clusters become failure types (near-duplicates merged), named by `labeller` (default: the one `params`
    names), grouped into categories per phase; every clustered insight is recorded in `insight_failure_types`
    (outliers go to the nearest type or 'unassigned'). Raises NotFoundError when a clustering is missing,
    InputError when members lack embeddings, ConfigError for inconsistent inputs or an unusable labeller.
    """
    params = params or BuildParams()
    started = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    clustering_ids = list(clustering_ids) if clustering_ids else latest_clusterings(store)
    inputs = [load_clustering(store, c) for c in clustering_ids]
    models = sorted({(ci.embed_model, ci.normalisation) for ci in inputs})
    if len(models) != 1:
        raise ConfigError(
            f"the clusterings use different embeddings (model, normalisation): {models}",
            hint="build a taxonomy from clusterings of one embedding model and normaliser",
        )
    phases_seen = [ci.phase for ci in inputs]
    if len(set(phases_seen)) != len(phases_seen):
        raise ConfigError(f"two clusterings cover the same phase: {phases_seen}", hint="pass one per phase")
    labeller = labeller or make_labeller(params.labeller, store=store, **params.labeller_args)

    drafts: list[_Draft] = []
    outliers: list[tuple[str, str, np.ndarray]] = []  # (insight_id, phase, vector)
    for ci in inputs:
        vectors = require_vectors(
            store, ci.members["text"].to_list(), ci.embed_model, f"insights of {ci.id}", ci.normalisation
        )
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
    return _store_snapshot(store, clustering_ids, models[0], params, started, categories, types, records)


def _store_snapshot(
    store: Store,
    clustering_ids: list[str],
    embedding: tuple[str, str],
    params: BuildParams,
    started: dt.datetime,
    categories: list[FailureCategory],
    types: list[FailureType],
    records: list[tuple[str, str, float | None, str]],
) -> Taxonomy:
    version_code = code_version()
    embed_model, normalisation = embedding
    key = json.dumps([clustering_ids, params.model_dump(mode="json"), started.isoformat()], sort_keys=True)
    taxonomy_id = "tx-" + hashlib.sha256(key.encode()).hexdigest()[:10]
    with store.write() as conn:
        version = conn.execute("SELECT coalesce(max(version), 0) + 1 FROM taxonomies").fetchone()[0]
        conn.execute(
            "INSERT INTO taxonomies"
            " (id, version, clustering_ids, embed_model, normalisation, params, code_version, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                taxonomy_id,
                version,
                json.dumps(clustering_ids),
                embed_model,
                normalisation,
                params.model_dump_json(),
                version_code,
                started,
            ],
        )
        if categories:
            conn.executemany(
                "INSERT INTO failure_categories (taxonomy_id, id, phase, name, definition, keywords,"
                " naming_method, prompt, raw_reply) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    [
                        taxonomy_id,
                        c.id,
                        c.phase,
                        c.name,
                        c.definition,
                        json.dumps(c.keywords),
                        c.naming_method,
                        None if c.prompt is None else json.dumps(c.prompt),
                        c.raw_reply,
                    ]
                    for c in categories
                ],
            )
        if types:
            conn.executemany(
                "INSERT INTO failure_types (taxonomy_id, id, phase, category_id, name, definition,"
                " inclusion_criteria, examples, keywords, centroid, n_insights, merged_from, naming_method,"
                " prompt, raw_reply) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    [
                        taxonomy_id,
                        t.id,
                        t.phase,
                        t.category_id,
                        t.name,
                        t.definition,
                        json.dumps(t.inclusion_criteria),
                        json.dumps([e.model_dump() for e in t.examples]),
                        json.dumps(t.keywords),
                        t.centroid,
                        t.n_insights,
                        json.dumps(t.merged_from),
                        t.naming_method,
                        None if t.prompt is None else json.dumps(t.prompt),
                        t.raw_reply,
                    ]
                    for t in types
                ],
            )
        write_assignments(store, [(taxonomy_id, iid, tid, s, m) for tid, iid, s, m in records])
        n_unassigned = sum(1 for r in records if r[0] == UNASSIGNED)
        conn.execute(
            "INSERT INTO stage_runs"
            " (id, stage, params, code_version, started_at, finished_at, status, summary)"
            " VALUES (?, 'taxonomy.build', ?, ?, ?, ?, 'completed', ?)",
            [
                f"taxonomy.build:{taxonomy_id}",
                params.model_dump_json(),
                version_code,
                started,
                dt.datetime.now(dt.UTC).replace(tzinfo=None),
                json.dumps(
                    {
                        "taxonomy_id": taxonomy_id,
                        "version": version,
                        "n_types": len(types),
                        "n_categories": len(categories),
                        "n_assigned": len(records) - n_unassigned,
                        "n_unassigned": n_unassigned,
                    }
                ),
            ],
        )
    return Taxonomy(
        id=taxonomy_id,
        version=version,
        clustering_ids=clustering_ids,
        embed_model=embed_model,
        normalisation=normalisation,
        params=params,
        code_version=version_code,
        categories=categories,
        types=types,
        n_assigned=len(records) - n_unassigned,
        n_unassigned=n_unassigned,
    )

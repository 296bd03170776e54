"""Assigning insights to an existing taxonomy without re-clustering: nearest failure-type centroid of the
insight's phase and kind, or 'unassigned' when none is close enough. So a new agent's runs land on the same
types."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from failatlas.core.errors import NotFoundError
from failatlas.core.store import Store
from failatlas.embed import get_set
from failatlas.taxonomy.facets import by_kind
from failatlas.taxonomy.inputs import normalise, require_vectors
from failatlas.taxonomy.model import UNASSIGNED
from failatlas.taxonomy.writes import write_assignments


def nearest_centroid(
    vectors: np.ndarray, centroids: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """For unit-length `vectors` (n x d) and `centroids` (k x d): the index of the nearest
    centroid by cosine, or
    -1 where the best cosine is below `threshold`, and that best cosine (NaN when k = 0)."""
    n = len(vectors)
    if len(centroids) == 0 or n == 0:
        return np.full(n, -1, dtype=int), np.full(n, np.nan)
    sims = normalise(vectors) @ normalise(centroids).T
    best = sims.argmax(axis=1)
    score = sims[np.arange(n), best].astype(float)
    return np.where(score >= threshold, best, -1), score


class AssignSummary(BaseModel):
    """What `assign_insights` did, per phase: how many insights joined a type and how many fit none."""

    taxonomy_id: str
    threshold: float
    assigned: dict[str, int]
    unassigned: dict[str, int]


def assign_by_phase(
    phases: Sequence[str],
    vectors: np.ndarray,
    types_by_phase: Mapping[str, tuple[list[str], np.ndarray]],
    threshold: float,
) -> tuple[list[str], np.ndarray]:
    """Failure-type id (or 'unassigned') and cosine for each vector, choosing only among its phase's types."""
    ids = [UNASSIGNED] * len(phases)
    sims = np.full(len(phases), np.nan)
    phases_arr = np.asarray(phases, dtype=object)
    for phase in sorted(set(phases)):
        rows = np.flatnonzero(phases_arr == phase)
        type_ids, centroids = types_by_phase.get(phase, ([], np.zeros((0, vectors.shape[1]))))
        idx, score = nearest_centroid(vectors[rows], centroids, threshold)
        sims[rows] = score
        for r, k in zip(rows, idx, strict=True):
            if k >= 0:
                ids[r] = type_ids[k]
    return ids, sims


def taxonomy_centroids(store: Store, taxonomy_id: str) -> dict[str, tuple[list[str], np.ndarray]]:
    """Per phase: the taxonomy's failure-type ids and their centroids."""
    rows = store.query(
        "SELECT phase, id, centroid FROM failure_types WHERE taxonomy_id = ? ORDER BY phase, id",
        [taxonomy_id],
    )
    out: dict[str, tuple[list[str], list[list[float]]]] = {}
    for phase, type_id, centroid in rows:
        ids, cents = out.setdefault(phase, ([], []))
        ids.append(type_id)
        cents.append(centroid)
    return {p: (ids, np.asarray(c, dtype=np.float32)) for p, (ids, c) in out.items()}


# The order readers list snapshots in, the current one first: the latest to become current (built, or found
# already stored by a build), then the newest version.
CURRENT_FIRST = "coalesce(current_since, created_at) DESC, version DESC"


def resolve_taxonomy(store: Store, taxonomy_id: str | None) -> str:
    """The given taxonomy id, a version number as text, or the current taxonomy when None (the last one a build
    made or found already stored: `CURRENT_FIRST`)."""
    if taxonomy_id is None:
        rows = store.query(f"SELECT id FROM taxonomies ORDER BY {CURRENT_FIRST} LIMIT 1")  # noqa: S608
        if not rows:
            raise NotFoundError(
                "the store holds no taxonomy", hint="build one with `failatlas taxonomy build`"
            )
        return rows[0][0]
    rows = store.query(
        "SELECT id FROM taxonomies WHERE id = ? OR CAST(version AS VARCHAR) = ? OR 'v' || version = ?",
        [taxonomy_id, taxonomy_id, taxonomy_id],
    )
    if not rows:
        raise NotFoundError(f"no taxonomy '{taxonomy_id}'", hint="list them with `failatlas taxonomy list`")
    return rows[0][0]


def assign_insights(
    store: Store,
    taxonomy_id: str | None = None,
    insight_ids: Sequence[str] | None = None,
    *,
    threshold: float | None = None,
    vectors: Mapping[str, np.ndarray] | None = None,
) -> AssignSummary:
    """Assign insights to the taxonomy's failure types and record them in `insight_failure_types`.

    By default every insight not yet assigned in this taxonomy; `insight_ids` picks others (re-assigning
    them).
    Vectors come from `vectors` (insight id -> vector) or else the taxonomy's embedding set. `threshold`
    defaults to the one the taxonomy was built with. Raises NotFoundError for an unknown taxonomy or insight (or
    a taxonomy that records no embedding set) and InputError when an insight has no vector.
    """
    taxonomy_id = resolve_taxonomy(store, taxonomy_id)
    ((set_id, params_json),) = store.query(
        "SELECT embedding_set_id, params FROM taxonomies WHERE id = ?", [taxonomy_id]
    )
    if threshold is None:
        threshold = float(json.loads(params_json)["assign_threshold"])
    if insight_ids is None:
        rows = store.query(
            "SELECT id, phase, text FROM insights WHERE id NOT IN"
            " (SELECT insight_id FROM insight_failure_types WHERE taxonomy_id = ?) ORDER BY id",
            [taxonomy_id],
        )
    else:
        rows = store.query(
            "SELECT id, phase, text FROM insights WHERE id IN (SELECT unnest(?::VARCHAR[])) ORDER BY id",
            [list(insight_ids)],
        )
        missing = set(insight_ids) - {r[0] for r in rows}
        if missing:
            raise NotFoundError(f"{len(missing)} insight id(s) not in the store, e.g. '{sorted(missing)[0]}'")
    summary = AssignSummary(taxonomy_id=taxonomy_id, threshold=threshold, assigned={}, unassigned={})
    if not rows:
        return summary
    ids = [r[0] for r in rows]
    phases = [r[1] for r in rows]
    if vectors is not None:
        lacking = [i for i in ids if i not in vectors]
        if lacking:
            raise NotFoundError(f"no vector passed for {len(lacking)} insight(s), e.g. '{lacking[0]}'")
        matrix = normalise(np.stack([np.asarray(vectors[i], dtype=np.float32) for i in ids]))
    else:
        if set_id is None:
            raise NotFoundError(f"taxonomy {taxonomy_id} records no embedding set",
                                hint="pass vectors in, or build a new taxonomy from a current clustering")
        matrix = require_vectors(store, [r[2] for r in rows], get_set(store, set_id), "insights to assign")
    keys, centroids = by_kind(store, taxonomy_id, ids, phases, taxonomy_centroids(store, taxonomy_id))
    type_ids, sims = assign_by_phase(keys, matrix, centroids, threshold)  # a type of the insight's phase and kind
    records = [
        (
            taxonomy_id,
            i,
            t,
            None if np.isnan(s) else float(s),
            "nearest_centroid" if t != UNASSIGNED else UNASSIGNED,
        )
        for i, t, s in zip(ids, type_ids, sims, strict=True)
    ]
    write_assignments(store, records)
    for phase, t in zip(phases, type_ids, strict=True):
        bucket = summary.unassigned if t == UNASSIGNED else summary.assigned
        bucket[phase] = bucket.get(phase, 0) + 1
    return summary

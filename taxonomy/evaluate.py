"""Measuring a taxonomy: do its names say what is in each type (name fidelity), how much does a seed explain
(coverage), and, where insights carry human labels, how well do its types match them (ARI, NMI, per-label
recall)."""

from __future__ import annotations

from typing import Any

import numpy as np

from failatlas.cluster.metrics import name_fidelity, quality_metrics
from failatlas.core.store import Store
from failatlas.embed import Embedder, get_set
from failatlas.taxonomy.assign import resolve_taxonomy
from failatlas.taxonomy.definitions import name_text
from failatlas.taxonomy.inputs import query_frame, require_vectors
from failatlas.taxonomy.label_quality import label_cross_validation, seed_accuracy
from failatlas.taxonomy.model import Taxonomy
from failatlas.taxonomy.read import load_taxonomy

_LABEL_COLUMNS = ("label",)


def evaluate_taxonomy(
    store: Store,
    taxonomy_id: str | None = None,
    *,
    labels: str | None = "label",
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Quality of a stored taxonomy:

    - `name_fidelity`: every assigned insight goes to the type of its phase whose name + definition vector is
      nearest (the taxonomy's embedding model, or `embedder`); the share landing in its own type, overall and
      per type (`fidelity_by_type`);
    - `coverage`: per phase of a seeded build, the share of insights the seed explains (with its threshold);
    - `seed_accuracy`: where insights carry imported labels, the share of the seed categories' members whose
      label is that category, per-category precision and recall (taxonomy/label_quality.py); None otherwise;
    - `label_cv`: where a person gave labels, the cross-validated accuracy of the learned assignment on them;
    - with `labels` (an `insight_sources` column, majority label per insight, ties alphabetically) and where
      insights carry one: ARI, NMI, per-label recall and the rest of `quality_metrics` of the types against it
      (unassigned insights count as one more group, as outliers do for clusterings).

    Raises NotFoundError for an unknown taxonomy, InputError when insights lack vectors, ConfigError for a
    label column that does not exist."""
    from failatlas.core.errors import ConfigError

    tax = load_taxonomy(store, resolve_taxonomy(store, taxonomy_id))
    rows = query_frame(
        store,
        "SELECT a.insight_id, a.failure_type_id, i.phase, i.text FROM insight_failure_types a"
        " JOIN insights i ON i.id = a.insight_id WHERE a.taxonomy_id = ? ORDER BY a.insight_id",
        [tax.id],
    )
    out: dict[str, Any] = {
        "taxonomy_id": tax.id,
        "n_insights": rows.height,
        "n_types": len(tax.types),
        "coverage": {r.phase: {"coverage": r.coverage, "threshold": r.threshold, "n_insights": r.n_insights}
                     for r in tax.seed_reports},
    }
    out["seed_accuracy"] = seed_accuracy(store, tax)
    out["label_cv"] = label_cross_validation(store, tax, embedder) if tax.params.use_labels else None
    index = {t.id: k for k, t in enumerate(tax.types)}
    assigned = np.array([index.get(t, -1) for t in rows["failure_type_id"].to_list()], dtype=np.int64)
    out.update(_fidelity(store, tax, rows["text"].to_list(), rows["phase"].to_list(), assigned, embedder))
    if labels is not None:
        if labels not in _LABEL_COLUMNS:
            raise ConfigError(f"unknown label column '{labels}'", hint=f"use one of: {', '.join(_LABEL_COLUMNS)}")
        votes = dict(
            store.query(
                f"SELECT insight_id, {labels} FROM (SELECT insight_id, {labels}, row_number() OVER (PARTITION BY"
                f" insight_id ORDER BY count(*) DESC, {labels}) AS r FROM insight_sources WHERE {labels} IS NOT"
                f" NULL AND insight_id IN (SELECT insight_id FROM insight_failure_types WHERE taxonomy_id = ?)"
                f" GROUP BY insight_id, {labels}) WHERE r = 1",
                [tax.id],
            )
        )
        ids = rows["insight_id"].to_list()
        labelled = [k for k, i in enumerate(ids) if i in votes]
        if labelled:
            metrics = quality_metrics([votes[ids[k]] for k in labelled], assigned[labelled])
            out["labels"] = {"column": labels, **metrics}
    return out


def _fidelity(
    store: Store,
    tax: Taxonomy,
    texts: list[str],
    phases: list[str],
    assigned: np.ndarray,
    embedder: Embedder | None,
) -> dict[str, Any]:
    """Name fidelity per phase (an insight chooses only among its phase's types), pooled over phases."""
    if not tax.types or not (assigned >= 0).any():
        return {"name_fidelity": float("nan"), "fidelity_by_type": {}}
    if tax.embedding_set_id is None:
        return {"name_fidelity": float("nan"), "fidelity_by_type": {}}
    embedding_set = get_set(store, tax.embedding_set_id)
    if embedder is None:
        from failatlas.embed import get_embedder

        embedder = get_embedder(embedding_set.model)
    from failatlas.embed import normaliser_named

    normalise = normaliser_named(embedding_set.normalisation)
    name_vectors = np.asarray(embedder.encode(normalise([name_text(t.name, t.definition) for t in tax.types])))
    vectors = require_vectors(store, texts, embedding_set, "insights of the taxonomy")
    phases_arr = np.asarray(phases, dtype=object)
    hits = 0
    counted = 0
    by_type: dict[str, float] = {}
    for phase in sorted(set(phases)):
        mine = [k for k, t in enumerate(tax.types) if t.phase == phase]
        if not mine:
            continue
        local = {g: j for j, g in enumerate(mine)}
        rows = np.flatnonzero((phases_arr == phase) & (assigned >= 0))
        local_assigned = np.array([local.get(int(assigned[r]), -1) for r in rows], dtype=np.int64)
        result = name_fidelity(vectors[rows], local_assigned, name_vectors[mine])
        if result["n_items"]:
            hits += result["fidelity"] * result["n_items"]
            counted += result["n_items"]
        by_type.update({tax.types[mine[j]].id: share for j, share in result["per_group"].items()})
    return {"name_fidelity": hits / counted if counted else float("nan"), "fidelity_by_type": by_type,
            "fidelity_items": counted}

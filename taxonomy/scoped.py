"""Labels that cannot take over: a label teaches only the phase and kind of the insights it was given on, and a
phase and kind learn only once labels there name at least two categories (`learned.MIN_LABELLED_CATEGORIES`).

In a phase whose insights all have kind `unknown` (imported free text) the learned categories are drawn before
clustering (`learned.learned_drafts`). Where the evidence decided kinds, the phase is built as without labels and
then each kind that learns moves the insights its learned categories take out of their types into those
categories; every other kind's types stay exactly as they were. `LabelEffect`s say what each label moved.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np

from failatlas.core.store import Store
from failatlas.taxonomy.drafts import Draft, draft_of
from failatlas.taxonomy.facets import Facets
from failatlas.taxonomy.inputs import ClusteringInput
from failatlas.taxonomy.learned import MIN_LABELLED_CATEGORIES, Learner, learned_categories, training_set
from failatlas.taxonomy.model import BuildParams, LabelEffect


def learn_within_kinds(drafts: list[Draft], outlier_ids: list[str], ci: ClusteringInput, vectors: np.ndarray,
                       phase: str, facets: Facets, params: BuildParams, learner: Learner
                       ) -> tuple[list[Draft], list[str], list[LabelEffect]]:
    """One phase's drafts and outliers (as built without labels) after each of its kinds that learns moved what
    its learned categories take into them, and what every label in scope did. `ci` and `vectors` are the whole
    clustering of the phase."""
    ids, texts = ci.members["insight_id"].to_list(), ci.members["text"].to_list()
    kinds = sorted({facets.of(i) for i in ids})
    learned: list[Draft] = []
    effects: list[LabelEffect] = []
    moved: set[str] = set()
    for kind in kinds:
        found: list[Draft] = []
        if learner.learns(phase, kind):
            rows = np.array([r for r, i in enumerate(ids) if facets.of(i) == kind], dtype=int)
            row_of = {i: r for r, i in enumerate(ids)}
            types = [vectors[[row_of[i] for i in d.insight_ids if facets.of(i) == kind]] for d in drafts]
            found, covered = learned_categories(rows, ids, texts, vectors, phase, params, learner, kind,
                                                types=[t for t in types if len(t)])
            moved |= {ids[r] for r in rows[covered]}
            learned += found
        effects += label_effects(learner, phase, kind, found)
    if not moved:
        return drafts, outlier_ids, effects
    row_of = {i: r for r, i in enumerate(ids)}
    kept = []
    for d in drafts:
        rest = [row_of[i] for i in d.insight_ids if i not in moved]
        if len(rest) == len(d.insight_ids):
            kept.append(d)
        elif rest:
            kept.append(draft_of(np.array(rest, dtype=int), ids, texts, vectors, d.phase, d.keywords, d.merged_from,
                                 origin=d.origin, seed_category=d.seed_category, report=d.report))
    return kept + learned, [i for i in outlier_ids if i not in moved], effects


def label_effects(learner: Learner, phase: str, kind: str, learned: list[Draft]) -> list[LabelEffect]:
    """What each stored label in scope of this phase and kind did: the insights its category took among
    `learned` (the drafts learned there), or why it taught nothing."""
    examples, labels = learner.in_scope(phase, kind)
    if not labels:
        return []
    data, categories = training_set(learner.seed, examples, labels, phase, seed_rows=False)
    category_of = {lab: categories[c].name for (_, _, lab), c in zip(labels, data.labels[len(examples):],
                                                                     strict=True)}
    n_labelled = Counter(lab for _, _, lab in labels)
    n_categories = len(set(data.labels))
    taken = Counter({d.seed_category.name: len(d.insight_ids) for d in learned if d.seed_category is not None})
    given = set(data.texts)  # the labelled statements: the others a category took are what the label spread to
    spread = {d.seed_category.name: sorted(i for i, t in zip(d.insight_ids, d.texts, strict=True) if t not in given)
              for d in learned if d.seed_category is not None}
    margin = learner.notes.get(f"{phase}/{kind}", {}).get("spread_margin")
    reason = None
    if n_categories < MIN_LABELLED_CATEGORIES:
        reason = (f"{phase}/{kind} has labels in only {n_categories} category (learning there needs"
                  f" {MIN_LABELLED_CATEGORIES}; it stays clustered)")
    return [LabelEffect(label=label, phase=phase, kind=kind, n_labelled=n, moved=taken[category_of[label]],
                        spread_to=spread.get(category_of[label], []), margin=margin, not_used=reason)
            for label, n in sorted(n_labelled.items())]


def label_effects_of(store: Store, taxonomy_id: str) -> list[LabelEffect]:
    """What each label did in the build that made this snapshot (its `stage_runs` summary); [] for a snapshot
    built without labels."""
    rows = store.query("SELECT summary FROM stage_runs WHERE id = ?", [f"taxonomy.build:{taxonomy_id}"])
    summary = json.loads(rows[0][0]) if rows and rows[0][0] else {}
    return [LabelEffect.model_validate(e) for e in summary.get("label_effects") or []]

"""How well a taxonomy's seed assignment agrees with labels, in distinct statements (insights), never in
occurrences:

- `seed_accuracy`: against the labels imported data carries (`insight_sources.label`, majority per insight):
  of the insights a seed (or learned) category took, the share whose label is that category, and per category
  precision and recall, and what it was measured on (`evaluation_set`): held out when none of these statements is
  among the build's `--examples` (another dataset's, or another half's), in-sample for those that are.
- `label_cross_validation`: against the labels a person gave (`failatlas label`): k-fold cross-validation of the
  build's learned assignment, each fold's labels held out of training (the seed's texts and the examples always
  in), so the accuracy is measured on labels the model did not see.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from failatlas.core.errors import FailAtlasError
from failatlas.core.store import Store
from failatlas.embed import Embedder, get_set
from failatlas.taxonomy.learned import LabelModel, embed_texts, read_examples, same_category, training_set, user_labels
from failatlas.taxonomy.model import Taxonomy


def _per_category(truth: list[str], predicted: list[str | None], categories: list[str]) -> dict[str, dict]:
    """Precision and recall per category name; a prediction of None (not assigned to a category) is wrong."""
    out = {}
    for c in categories:
        said = [t for t, p in zip(truth, predicted, strict=True) if p == c]
        real = [p for t, p in zip(truth, predicted, strict=True) if same_category(c, t)]
        out[c] = {
            "assigned": len(said),
            "labelled": len(real),
            "precision": sum(same_category(c, t) for t in said) / len(said) if said else None,
            "recall": sum(p == c for p in real) / len(real) if real else None,
        }
    return out


def seed_accuracy(store: Store, tax: Taxonomy) -> dict[str, Any] | None:
    """Agreement of the seed categories' members with imported labels (see module doc); None without seed types
    or labels."""
    seed_types = {t.id: t.name for t in tax.types if t.origin == "seed"}
    if not seed_types:
        return None
    rows = store.query(
        "SELECT a.insight_id, a.failure_type_id, v.label, i.text FROM insight_failure_types a JOIN (SELECT"
        " insight_id, label FROM (SELECT insight_id, label, row_number() OVER (PARTITION BY insight_id ORDER BY"
        " count(*) DESC, label) AS r FROM insight_sources WHERE label IS NOT NULL GROUP BY insight_id, label)"
        " WHERE r = 1) v ON v.insight_id = a.insight_id JOIN insights i ON i.id = a.insight_id"
        " WHERE a.taxonomy_id = ? ORDER BY a.insight_id", [tax.id])
    if not rows:
        return None
    truth = [r[2] for r in rows]
    predicted = [seed_types.get(r[1]) for r in rows]
    covered = [k for k, p in enumerate(predicted) if p is not None]
    correct = sum(same_category(predicted[k], truth[k]) for k in covered)
    return {
        "unit": "distinct statements (insights)",
        "n_labelled": len(rows),
        "n_covered": len(covered),
        "accuracy": correct / len(covered) if covered else None,
        "accuracy_all": correct / len(rows),
        **evaluation_set(tax, [r[3] for r in rows]),
        "per_category": _per_category(truth, predicted, sorted(set(seed_types.values()))),
    }


def evaluation_set(tax: Taxonomy, texts: list[str]) -> dict[str, Any]:
    """What the accuracy was measured on, honestly: `in_sample` (how many of the labelled statements' texts the
    build's `--examples` hold, so the model saw their labels), `held_out` (none of them), and `evaluation`, a
    sentence naming the set (the store's imported labels, and whether the examples are another dataset's)."""
    from failatlas.ingest.model import text_hash

    if not tax.params.examples:
        return {"in_sample": 0, "held_out": True, "evaluation": f"{len(texts)} distinct statements labelled by the"
                " data they were imported with; nothing was learned from these labels"}
    try:
        seen = {text_hash(t) for t, _ in read_examples(tax.params.examples)}
    except FailAtlasError as exc:  # the files moved since the build: say that it cannot be told
        return {"in_sample": None, "held_out": None, "evaluation": f"{len(texts)} distinct statements with imported"
                f" labels; whether --examples ({', '.join(tax.params.examples)}) held them cannot be told:"
                f" {exc.one_line()}"}
    inside = sum(text_hash(t) in seen for t in texts)
    files = ", ".join(tax.params.examples)
    if not inside:
        return {"in_sample": 0, "held_out": True, "evaluation": f"held out: {len(texts)} distinct statements with"
                f" imported labels, none of them among the {len(seen)} examples the build learned from ({files})"}
    return {"in_sample": inside, "held_out": False, "evaluation": f"in-sample for {inside} of {len(texts)} distinct"
            f" statements: their texts are among the examples the build learned from ({files})"}


def label_cross_validation(store: Store, tax: Taxonomy, embedder: Embedder | None = None, folds: int = 5,
                           ) -> dict[str, Any] | None:
    """k-fold cross-validated accuracy of the learned assignment over the user's labels (see module doc); None
    when the store holds fewer than `folds` labels or the taxonomy records no embedding set."""
    labels = user_labels(store)
    if len(labels) < folds or tax.embedding_set_id is None:
        return None
    from failatlas.embed import get_embedder, normaliser_named

    embedding_set = get_set(store, tax.embedding_set_id)
    model = embedder or get_embedder(embedding_set.model)
    normalise = normaliser_named(embedding_set.normalisation)
    seed, params = tax.params.seed_taxonomy, tax.params
    examples = read_examples(params.examples) if params.examples else []
    phase = Counter(t.phase for t in tax.types).most_common(1)[0][0] if tax.types else "other"
    order = np.random.default_rng(params.seed).permutation(len(labels))
    truth: list[str] = []
    predicted: list[str | None] = []
    for fold in range(folds):
        held = [labels[i] for i in order[fold::folds]]
        kept = [labels[i] for i in order if i not in set(order[fold::folds])]
        data, _ = training_set(seed, examples, kept, phase)
        vectors = embed_texts(store, embedding_set, data.texts, lambda t: model.encode(normalise(t)))
        fitted = LabelModel().fit(vectors, data.texts, data.labels)
        texts = [t for _, t, _ in held]
        proba = fitted.predict_proba(embed_texts(store, embedding_set, texts, lambda t: model.encode(normalise(t))),
                                     texts)
        for (_, _, label), row in zip(held, proba, strict=True):
            truth.append(label)
            predicted.append(str(fitted.classes_[row.argmax()]) if row.max() >= params.label_threshold else None)
    correct = sum(p is not None and same_category(p, t) for t, p in zip(truth, predicted, strict=True))
    return {
        "unit": "distinct statements (labelled texts)",
        "folds": folds,
        "n_labels": len(truth),
        "accuracy": correct / len(truth),
        "per_category": _per_category(truth, predicted, sorted({p for p in predicted if p} | set(truth))),
    }

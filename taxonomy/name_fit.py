"""Whether a taxonomy's names fit their members, unnamed occurrences, and category recovery (issue 53).

The rule a reader applies ("a name fits when at least 4 of its 5 most central statements are that failure") made
measurable, with no labels needed:

- a name **fits** when it is a readable failure name (not the honest "Unnamed type", no fragment shape:
  `labelling.readable.unreadable_reason`) and at least 4 of its 5 most central members (all but one of a type
  of 2-4; the one of a type of 1) are that failure: where the type is named after a category the statements
  carry as imported labels (a seed's or learned category, "Formatting Errors"), a member is that failure when
  its label is that category (the annotators' word on it); otherwise when it is nearer, in the taxonomy's
  embedding model, to this type's *name alone* than to the name of any other type of their phase
  (`fits_by_name_alone` applies the second test to every type). The name must pick its statements out from among the
  phase's other names, as a reader matching statements to names would. (A phase of one type fits trivially by the
  second test: there is nothing to confuse it with.) `fits_defined` is the second test with each name read beside its
  one-line definition (`one_line`: the definition without its quoted examples and counts), as a reader reads a
  taxonomy's table.
- **unnamed share**: the share of the assigned occurrences (insights.n_occurrences) that sit in types named
  "Unnamed type".
- **category recovery** (where insights carry imported labels): the share of labelled categories with 3 or more
  distinct statements for which some type reaches F1 >= 0.5 against the category's statements (LangSmith's
  insights agent reports 88% on 17 expert categories by the same rule).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from failatlas.core.store import Store
from failatlas.embed import Embedder
from failatlas.taxonomy.labelling.readable import is_honest, unreadable_reason
from failatlas.taxonomy.model import Taxonomy
from failatlas.taxonomy.name_choice import CENTRAL, needed

_EXAMPLES = re.compile(r"(,? e\.g\. |\s+Here, e\.g\. |\s+Here\.?$).*$", re.DOTALL)
_COUNT = re.compile(r"\s*\(\d+ [a-z_]+ insights?\)")


def one_line(definition: str) -> str:
    """A definition without its quoted examples, the count of insights and the note on a withheld name."""
    text = _EXAMPLES.sub("", definition.split("read the examples. ")[-1])
    return _COUNT.sub("", text).strip().rstrip(".")
RULE = ("a readable name (not 'Unnamed type', no fragment shape) whose 5 most central members, at least 4 of them"
        " (all but one of 2-4, the one of 1), are nearer to it than to any other name of their phase (the"
        " taxonomy's embedding model, the name alone)")


def name_fit(store: Store, tax: Taxonomy, embedder: Embedder | None = None) -> dict[str, Any]:
    """Per type whether its name fits (the module's rule), the share of types that fit, and the unnamed share
    of occurrences. Raises InputError when members lack vectors (the embedding set's vectors are required)."""
    from failatlas.embed import get_embedder, get_set, normaliser_named
    from failatlas.taxonomy.inputs import require_vectors
    from failatlas.taxonomy.learned import same_category

    rows = store.query(
        "SELECT a.failure_type_id, i.text, i.n_occurrences, row_number() OVER (PARTITION BY a.failure_type_id"
        " ORDER BY a.similarity DESC NULLS LAST, i.id) AS r, v.label FROM insight_failure_types a JOIN insights i"
        " ON i.id = a.insight_id LEFT JOIN (SELECT insight_id, label FROM (SELECT insight_id, label, row_number()"
        " OVER (PARTITION BY insight_id ORDER BY count(*) DESC, label) AS k FROM insight_sources WHERE label IS NOT"
        " NULL GROUP BY insight_id, label) WHERE k = 1) v ON v.insight_id = a.insight_id WHERE a.taxonomy_id = ?",
        [tax.id])
    occurrences: dict[str, int] = {}
    central: dict[str, list[str]] = {}
    labels: dict[str, list[str | None]] = {}
    for type_id, text, n, rank, label in rows:
        occurrences[type_id] = occurrences.get(type_id, 0) + int(n or 1)
        if rank <= CENTRAL:
            central.setdefault(type_id, []).append(text)
            labels.setdefault(type_id, []).append(label)
    total = sum(n for t, n in occurrences.items() if t != "unassigned")
    unnamed = sum(occurrences.get(t.id, 0) for t in tax.types if is_honest(t.name))
    out: dict[str, Any] = {"rule": RULE, "n_types": len(tax.types), "unnamed_share": unnamed / total if total else 0.0,
                           "per_type": {}}
    if not tax.types or tax.embedding_set_id is None:
        out.update(n_fit=0, share=float("nan"))
        return out
    embedding_set = get_set(store, tax.embedding_set_id)
    model = embedder or get_embedder(embedding_set.model)
    normalise = normaliser_named(embedding_set.normalisation)
    def unit(texts: list[str]) -> np.ndarray:
        v = np.asarray(model.encode(normalise(texts)), dtype=np.float64)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    names = unit([t.name for t in tax.types])
    defined = unit([f"{t.name}: {one_line(t.definition)}" for t in tax.types])
    for k, t in enumerate(tax.types):
        texts = central.get(t.id, [])
        readable = not is_honest(t.name) and unreadable_reason(t.name) is None
        hits = hits_defined = 0
        if texts:
            vectors = np.asarray(require_vectors(store, texts, embedding_set, f"members of {t.id}"), dtype=np.float64)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            phase = [j for j, o in enumerate(tax.types) if o.phase == t.phase]
            hits = int((np.asarray(phase)[np.argmax(vectors @ names[phase].T, axis=1)] == k).sum())
            hits_defined = int((np.asarray(phase)[np.argmax(vectors @ defined[phase].T, axis=1)] == k).sum())
        need = needed(len(texts))
        # a type named after a category the statements carry as labels: "that failure" is that label
        labelled = [lab for lab in labels.get(t.id, []) if lab is not None]
        named_label = any(same_category(t.name, lab) for lab in set(labelled)) if labelled else False
        carry = sum(lab is not None and same_category(t.name, lab) for lab in labels.get(t.id, []))
        fits = readable and bool(texts) and (carry >= need if named_label else hits >= need)
        out["per_type"][t.id] = {"name": t.name, "readable": readable, "central": len(texts), "nearest_own": hits,
                                 "labelled_as_named": carry if named_label else None, "fits": fits,
                                 "fits_by_name_alone": readable and bool(texts) and hits >= need,
                                 "nearest_own_defined": hits_defined,
                                 "fits_defined": readable and bool(texts) and hits_defined >= need}
    out["n_fit"] = sum(v["fits"] for v in out["per_type"].values())
    out["share"] = out["n_fit"] / len(tax.types)
    out["n_fit_by_name_alone"] = sum(v["fits_by_name_alone"] for v in out["per_type"].values())
    out["n_fit_defined"] = sum(v["fits_defined"] for v in out["per_type"].values())
    out["share_defined"] = out["n_fit_defined"] / len(tax.types)
    return out


def category_recovery(store: Store, tax: Taxonomy, labels: str = "label", min_size: int = 3) -> dict[str, Any] | None:
    """The share of labelled categories (majority imported label per distinct statement, `min_size` statements or
    more among the taxonomy's) for which some type reaches F1 >= 0.5, with each category's best F1; None when the
    insights carry no labels."""
    votes = dict(store.query(
        f"SELECT insight_id, {labels} FROM (SELECT insight_id, {labels}, row_number() OVER (PARTITION BY insight_id"  # noqa: S608
        f" ORDER BY count(*) DESC, {labels}) AS r FROM insight_sources WHERE {labels} IS NOT NULL GROUP BY"
        f" insight_id, {labels}) WHERE r = 1"))
    assigned = dict(store.query("SELECT insight_id, failure_type_id FROM insight_failure_types WHERE taxonomy_id = ?",
                                [tax.id]))
    ids = [i for i in assigned if i in votes]
    if not ids:
        return None
    by_label: dict[str, set[str]] = {}
    by_type: dict[str, set[str]] = {}
    for i in ids:
        by_label.setdefault(votes[i], set()).add(i)
        if assigned[i] != "unassigned":
            by_type.setdefault(assigned[i], set()).add(i)
    best: dict[str, float] = {}
    for label, members in by_label.items():
        if len(members) < min_size:
            continue
        best[label] = max((2 * len(members & m) / (len(members) + len(m)) for m in by_type.values()), default=0.0)
    recovered = sum(f >= 0.5 for f in best.values())
    return {"recovery": recovered / len(best) if best else float("nan"), "n_categories": len(best),
            "n_recovered": recovered, "best_f1": {k: round(v, 3) for k, v in sorted(best.items())}}

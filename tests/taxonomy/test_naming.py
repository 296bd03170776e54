"""Offline naming: readable, distinct names traceable to the insights behind them."""

from __future__ import annotations

import json
import re

import numpy as np

from failatlas.taxonomy import class_tfidf
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labelling import readable_name
from failatlas.taxonomy.labelling.phrases import BARE_TOKENS
from tests.taxonomy.conftest import TRAIL_CLUSTERING, TRAIL_PARAMS


def test_class_tfidf_finds_the_words_that_set_a_class_apart():
    texts = [
        "ModuleNotFoundError: no module named torch",
        "missing module numpy at import",
        "tensor shape mismatch in the loss",
        "shape mismatch between tensors",
    ]
    kw = class_tfidf(texts, [0, 0, 1, 1], top_n=4)
    assert "module" in " ".join(t for t, _ in kw[0])
    assert "shape" in " ".join(t for t, _ in kw[1])
    assert "module" not in " ".join(t for t, _ in kw[1])


def test_readable_name_joins_words_that_stand_together():
    texts = [
        "Missing module foo raised an import error",
        "missing module bar, import error at start",
        "import error: missing module baz",
    ]
    assert readable_name(["module", "missing", "import", "error"], texts) == "Missing module / import error"
    assert readable_name([], []) == "Miscellaneous"


def test_offline_names_on_trail_are_distinct_readable_and_traceable(trail_store):
    tax = build(trail_store, TRAIL_PARAMS)
    names = [t.name for t in tax.types]
    assert len(names) >= 15
    assert len({n.lower() for n in names}) == len(names)
    for t in tax.types:
        assert t.name and len(t.name) <= 70 and re.search(r"[A-Za-z]{3}", t.name), t.name
        first = t.name.split()[0]
        assert t.name[0].isupper() or "_" in first or not first.isalpha(), t.name  # or an identifier
        assert 'e.g. "' in t.definition and len(t.definition) > 40  # with representative insights
        assert not set(re.findall(r"[a-z0-9]+", t.name.lower())) <= BARE_TOKENS, t.name
        assert t.naming_method == "offline" and t.prompt is None
        assert t.keywords and t.examples and t.inclusion_criteria

    # Traceable: every example is a member of its type, in the store, and comes from the clusters it names.
    members = dict(
        trail_store.query(
            "SELECT insight_id, failure_type_id FROM insight_failure_types WHERE taxonomy_id = ?", [tax.id]
        )
    )
    cluster_of = dict(
        trail_store.query(
            "SELECT insight_id, cluster FROM cluster_assignments WHERE clustering_id = ?", [TRAIL_CLUSTERING]
        )
    )
    text_of = dict(trail_store.query("SELECT id, text FROM insights"))
    for t in tax.types:
        clusters = {int(m.split(":")[1]) for m in t.merged_from}
        assert all(m.startswith(TRAIL_CLUSTERING + ":") for m in t.merged_from)
        for e in t.examples:
            assert members[e.insight_id] == t.id
            assert cluster_of[e.insight_id] in clusters
            assert text_of[e.insight_id] == e.text
        sims = [e.similarity for e in t.examples]
        assert sims == sorted(sims, reverse=True)

    # The stored row is what the function returned.
    stored = trail_store.query(
        "SELECT name, examples, n_insights FROM failure_types WHERE taxonomy_id = ? AND id = ?",
        [tax.id, tax.types[0].id],
    )[0]
    assert stored[0] == tax.types[0].name
    assert json.loads(stored[1])[0]["insight_id"] == tax.types[0].examples[0].insight_id
    n_members = sum(1 for v in members.values() if v == tax.types[0].id)
    assert stored[2] <= n_members


def test_names_state_the_failure_on_the_formatting_cluster(trail_store, trail_template):
    """The TRAIL cluster of '<end_plan>' formatting errors gets a name that says so."""
    tax = build(trail_store, TRAIL_PARAMS)
    end_plan = [
        i for i, t in zip(trail_template.insight_ids, trail_template.texts, strict=True) if "end_plan" in t
    ]
    assigned = dict(
        trail_store.query(
            "SELECT insight_id, failure_type_id FROM insight_failure_types WHERE taxonomy_id = ?", [tax.id]
        )
    )
    main_type = max({assigned[i] for i in end_plan}, key=lambda t: sum(assigned[i] == t for i in end_plan))
    name = next(t.name for t in tax.types if t.id == main_type)
    assert "end_plan" in name.lower()
    assert np.isfinite(next(t.centroid for t in tax.types if t.id == main_type)).all()

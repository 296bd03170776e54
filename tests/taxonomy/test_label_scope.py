"""Labels that cannot take over (issue 41): on a small store shaped like the demo's (four phases, the kinds the
harness's evidence gives), one label and a rebuild change nothing but what the build says about it; labels of two
categories in one phase and kind learn there and move only insights of that phase and kind; no type mixes kinds;
removing the labels restores the first assignment."""

from __future__ import annotations

from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labels import label_insights, remove_labels
from tests.taxonomy.fill import add_clustering, add_embeddings, add_insights, lsa_vectors

ROWS = {  # phase -> [(text, kind, object, cluster)]
    "implementation": [
        *[(f"Masked function `{f}` left unimplemented (NotImplementedError)", "unimplemented", f, 0)
          for f in ("kmeans.py::fit", "kmeans.py::init", "ridge.py::fit", "ridge.py::score", "tree.py::split")],
        *[(f"IndexError: index {n} is out of bounds for axis 0 in `kmeans.py::squared_distances`", "crash",
           "kmeans.py::squared_distances", 1) for n in (3, 5, 7)],
        *[(f"AttributeError: 'RidgeRegression' object has no attribute '{a}' in `ridge.py::RidgeRegression`",
           "crash", "ridge.py::RidgeRegression", 1) for a in ("coef_", "alpha_", "intercept_")],
        ("Module `experiment` that the task masked was never created", "module_not_created", "experiment", 0),
        ("Metric `accuracy` is 35% off its expected value", "wrong_value", "accuracy", 2),
        ("Metric `f1` is 12% off its expected value", "wrong_value", "f1", 2),
        ("Hidden test `test_fit` failed: expected 0.91, got 0.42", "wrong_value", "test_fit", -1),
    ],
    "conclusion": [
        *[(f"No conclusion written ({n})", "conclusion_missing", None, 0) for n in ("run a", "run b", "run c")],
        *[(f"The conclusion claims {m} improved although the re-run shows no change", "conclusion_unsupported",
           m, 0) for m in ("accuracy", "recall", "f1")],
    ],
    "design": [
        ("No experiment design written", "design_missing", "design", 0),
        ("The experiment design file is missing", "no_output", "design", 0),
        *[(f"Design variable `{v}` is missing from the agent's design", "design_variable", v, 1)
          for v in ("learning_rate", "n_clusters", "max_depth")],
    ],
    "execution": [
        *[(f"Results file reports {m} that the clean re-run did not produce", "result_not_produced", m, 0)
          for m in ("accuracy", "loss", "f1")],
        *[(f"Package `{p}` is not installed", "dependency_not_installed", p, 1) for p in ("torch", "sklearn-extra")],
    ],
}
UNIMPLEMENTED = ROWS["implementation"][0][0]
INDEX_ERROR, ATTRIBUTE_ERROR = ROWS["implementation"][5][0], ROWS["implementation"][8][0]


def _demo_like(store) -> dict[str, str]:
    """The store filled and clustered per phase; returns text -> insight id."""
    rows = [(phase, *row) for phase, items in ROWS.items() for row in items]
    ids = add_insights(store, [{"phase": p, "text": t, "run_id": f"r{n}"} for n, (p, t, *_) in enumerate(rows)])
    with store.write() as conn:
        conn.executemany("UPDATE insights SET kind = ?, object = ? WHERE id = ?",
                         [[k, o, i] for (_, _, k, o, _), i in zip(rows, ids, strict=True)])
    texts = [t for _, t, *_ in rows]
    add_embeddings(store, texts, lsa_vectors(texts, dim=16))
    for phase in ROWS:
        mine = [(i, c) for (p, *_, c), i in zip(rows, ids, strict=True) if p == phase]
        add_clustering(store, f"cl-{phase}", phase, [i for i, _ in mine], [c for _, c in mine])
    return dict(zip(texts, ids, strict=True))


def _assignment(store, taxonomy_id: str) -> dict[str, tuple[str, str, str, str]]:
    """insight id -> (phase, kind, type name, type id) in the taxonomy."""
    rows = store.query(
        "SELECT i.id, i.phase, i.kind, t.name, t.id FROM insight_failure_types a JOIN insights i ON i.id = a.insight_id"
        " JOIN failure_types t ON t.taxonomy_id = a.taxonomy_id AND t.id = a.failure_type_id"
        " WHERE a.taxonomy_id = ?", [taxonomy_id])
    return {r[0]: tuple(r[1:]) for r in rows}


def _partition(assigned: dict[str, tuple[str, str, str, str]], keep) -> set[tuple[str, frozenset[str]]]:
    """(type name, members) of the types as the insights that `keep` accepts see them."""
    members: dict[str, set[str]] = {}
    for iid, (phase, kind, _, type_id) in assigned.items():
        if keep(phase, kind):
            members.setdefault(type_id, set()).add(iid)
    names = {type_id: name for _, _, name, type_id in assigned.values()}
    return {(names[t], frozenset(m)) for t, m in members.items()}


def _types_mixing_kinds(assigned: dict[str, tuple[str, str, str, str]]) -> int:
    kinds: dict[str, set[str]] = {}
    for _, kind, _, type_id in assigned.values():
        kinds.setdefault(type_id, set()).add(kind)
    return sum(len(k) > 1 for k in kinds.values())


def test_one_label_changes_no_type_and_the_build_says_why(store):
    ids = _demo_like(store)
    before = build(store, BuildParams())
    first = _assignment(store, before.id)
    assert _types_mixing_kinds(first) == 0 and before.label_effects == []
    label_insights(store, [ids[UNIMPLEMENTED]], "Masked part left unimplemented")
    after = build(store, BuildParams())
    assert after.id != before.id  # the label is part of what the snapshot learned from
    assert _partition(_assignment(store, after.id), lambda p, k: True) == _partition(first, lambda p, k: True)
    [effect] = after.label_effects
    assert effect.describe() == (
        "label 'Masked part left unimplemented' (implementation/unimplemented): not used: implementation/unimplemented"
        " has labels in only 1 category (learning there needs 2; it stays clustered)")
    assert not any(r.method == "learned" for r in after.seed_reports)


def test_two_categories_in_a_phase_and_kind_learn_there_and_move_nothing_else(store):
    ids = _demo_like(store)
    first = _assignment(store, build(store, BuildParams()).id)
    label_insights(store, [ids[UNIMPLEMENTED]], "Masked part left unimplemented")  # another kind: not used
    label_insights(store, [ids[INDEX_ERROR]], "Index out of range")
    label_insights(store, [ids[ATTRIBUTE_ERROR]], "Attribute never set")
    learned = build(store, BuildParams())
    second = _assignment(store, learned.id)
    assert _types_mixing_kinds(second) == 0

    def elsewhere(phase: str, kind: str) -> bool:
        return (phase, kind) != ("implementation", "crash")

    assert _partition(second, elsewhere) == _partition(first, elsewhere)  # every other insight's type unchanged
    assert second[ids[INDEX_ERROR]][2] == "Index out of range"
    assert second[ids[ATTRIBUTE_ERROR]][2] == "Attribute never set"
    assert {name for phase, kind, name, _ in second.values() if "Index" in name or "Attribute" in name} == {
        "Index out of range", "Attribute never set"}
    effects = {(e.label, e.kind): e for e in learned.label_effects}
    assert effects["Masked part left unimplemented", "unimplemented"].not_used
    assert effects["Index out of range", "crash"].moved >= 1 and effects["Attribute never set", "crash"].moved >= 1
    assert effects["Index out of range", "crash"].describe().startswith(
        "label 'Index out of range' (implementation/crash): moved ")
    again = build(store, BuildParams())  # the same snapshot, reused: it still says what each label did
    assert again.id == learned.id and again.label_effects == learned.label_effects
    from failatlas.appdata.label_queries import label_effects  # what the app shows beside an insight's label

    assert label_effects(store, learned.id, "Index out of range") == [effects["Index out of range", "crash"].describe()]
    assert remove_labels(store, label="Index out of range") == 1
    assert remove_labels(store, label="Attribute never set") == 1
    restored = _assignment(store, build(store, BuildParams()).id)
    assert _partition(restored, lambda p, k: True) == _partition(first, lambda p, k: True)


def test_two_categories_in_different_kinds_of_a_phase_do_not_learn(store):
    ids = _demo_like(store)
    first = _assignment(store, build(store, BuildParams()).id)
    label_insights(store, [ids[UNIMPLEMENTED]], "Masked part left unimplemented")
    label_insights(store, [ids[INDEX_ERROR]], "Index out of range")
    after = build(store, BuildParams())
    assert _partition(_assignment(store, after.id), lambda p, k: True) == _partition(first, lambda p, k: True)
    assert all(e.not_used for e in after.label_effects) and len(after.label_effects) == 2

"""Failure types by cause on a hand-made store: a phase's insights of one kind are one type, whatever clusters they
were in (a cluster that mixes kinds is split, two clusters of one kind are one type), an outlier of a known kind
lands in the type of its kind, a type is named by its kind with its objects listed as data (never one type per
object), and later insights are assigned only to types of their kind."""

from __future__ import annotations

import numpy as np

from failatlas.ingest.kinds import KINDS
from failatlas.taxonomy import BuildParams, assign_insights
from failatlas.taxonomy import run as build
from failatlas.taxonomy.facets import facet_name, objects_of, objects_text
from tests.taxonomy.fill import add_clustering, add_embeddings, add_insights, lsa_vectors

ROWS = [  # (text, kind, object, cluster)
    ("Package `torch` is not installed", "dependency_not_installed", "torch", 0),
    ("Package `torchvision` is not installed", "dependency_not_installed", "torchvision", 0),
    ("Package `torch` could not be installed", "dependency_not_installed", "torch", 0),
    ("Module `torch_utils` of the repository was never created", "module_not_created", "torch_utils", 0),
    ("Masked function `ridge.py::fit` left unimplemented (NotImplementedError)", "unimplemented", "ridge.py::fit", 1),
    ("Masked function `ridge.py::score` left unimplemented (NotImplementedError)", "unimplemented",
     "ridge.py::score", 1),
    ("Masked function `kmeans.py::fit` left unimplemented (NotImplementedError)", "unimplemented",
     "kmeans.py::fit", 2),
    ("Masked function `kmeans.py::init` left unimplemented (NotImplementedError)", "unimplemented",
     "kmeans.py::init", 2),
    ("Masked function `kmeans.py::step` left unimplemented (NotImplementedError)", "unimplemented",
     "kmeans.py::step", 2),
    ("Module `experiment` that the task masked was never created", "module_not_created", "experiment", -1),
    ("Metric `accuracy` is 35% off its expected value", "wrong_value", "accuracy", -1),
]
LATER = ("Package `torch_utils` could not be installed", "crash", "torch_utils")


def _store(store):
    texts = [t for t, *_ in ROWS] + [LATER[0]]
    ids = add_insights(store, [{"phase": "execution", "text": t, "run_id": f"r{n}"} for n, t in enumerate(texts)])
    with store.write() as conn:
        conn.executemany("UPDATE insights SET kind = ?, object = ? WHERE id = ?",
                         [[k, o, i] for (_, k, o, *_), i in zip([*ROWS, (*LATER, None)], ids, strict=True)])
    add_embeddings(store, texts, lsa_vectors(texts, dim=8))
    add_clustering(store, "cl-exec", "execution", ids[:-1], [c for *_, c in ROWS])
    return ids


def _types(store, taxonomy_id):
    return store.query(
        "SELECT t.id, t.name, list(DISTINCT i.kind ORDER BY i.kind), list(i.text ORDER BY i.text),"
        " list(DISTINCT ift.method) FROM failure_types t JOIN insight_failure_types ift"
        " ON ift.taxonomy_id = t.taxonomy_id AND ift.failure_type_id = t.id JOIN insights i ON i.id = ift.insight_id"
        " WHERE t.taxonomy_id = ? GROUP BY ALL ORDER BY t.name", [taxonomy_id])


def test_types_are_causes_with_their_objects_as_data(store):
    ids = _store(store)
    taxonomy = build(store, BuildParams(assign_threshold=0.99, merge_threshold=0.99))
    types = _types(store, taxonomy.id)
    assert all(len(kinds) == 1 for _, _, kinds, _, _ in types)
    by_name = {name: (texts, methods) for _, name, _, texts, methods in types}
    assert sorted(by_name) == ["Dependency not installed", "Masked part left unimplemented",
                               "Required module never created", "Wrong result value"]
    # cluster 0 held two kinds: two types; the outlier `experiment` joined the type of its kind
    assert by_name["Required module never created"][0] == [
        "Module `experiment` that the task masked was never created",
        "Module `torch_utils` of the repository was never created"]
    # the outlier of a kind no cluster holds forms a type of its own
    assert by_name["Wrong result value"] == (["Metric `accuracy` is 35% off its expected value"], ["facet"])
    # the unimplemented functions of two clusters (ridge.py, kmeans.py) and five objects are one cause, one type
    assert len(by_name["Masked part left unimplemented"][0]) == 5
    type_of = {name: type_id for type_id, name, *_ in types}
    objects = objects_of(store, taxonomy.id)
    assert [o for o, _ in objects[type_of["Masked part left unimplemented"]]] == [
        "kmeans.py::fit", "kmeans.py::init", "kmeans.py::step", "ridge.py::fit", "ridge.py::score"]
    assert objects_text(objects[type_of["Dependency not installed"]]) == "torch (2), torchvision"
    criteria = {t.name: t.inclusion_criteria for t in taxonomy.types}
    assert "Objects: experiment, torch_utils." in criteria["Required module never created"]
    # every type has a known kind: categories by entry point, then by kind
    categories = dict(store.query(
        "SELECT t.name, c.name FROM failure_types t JOIN failure_categories c ON c.taxonomy_id = t.taxonomy_id"
        " AND c.id = t.category_id WHERE t.taxonomy_id = ?", [taxonomy.id]))
    assert {n for n, c in categories.items() if c == "Missing implementation component"} == {
        "Masked part left unimplemented", "Required module never created"}
    assert "Wrong result value" not in categories and "Dependency not installed" not in categories
    # a later insight is assigned only among the types of its kind: no crash type exists, so it fits none
    summary = assign_insights(store, taxonomy.id, [ids[-1]], threshold=-1.0)
    assert summary.unassigned == {"execution": 1} and summary.assigned == {}


def test_a_type_is_named_by_its_cause_alone():
    assert all(facet_name(k.id) == k.name for k in KINDS)
    assert facet_name("crash") == "Crash in agent code"
    assert np.all([isinstance(facet_name(k), str) for k in ("unknown", "no_such_kind")])


def test_one_fault_on_two_objects_is_one_type_listing_both(store):
    """fault-crash's one injected crash, met in two functions of two tasks and clustered apart by their words: one
    type, "Crash in agent code", whose objects are both functions."""
    rows = [("IndexError in `kmeans.py::squared_distances` (list index out of range) in 4 hidden tests",
             "kmeans.py::squared_distances", 0),
            ("IndexError in `ridge.py::RidgeRegression.__init__` (list index out of range) in 5 hidden tests",
             "ridge.py::RidgeRegression.__init__", 1),
            ("Masked function `ridge.py::fit` left unimplemented (NotImplementedError)", None, 2)]
    ids = add_insights(store, [{"phase": "implementation", "text": t, "run_id": f"r{n}"}
                               for n, (t, _, _) in enumerate(rows)])
    with store.write() as conn:
        conn.executemany("UPDATE insights SET kind = ?, object = ? WHERE id = ?",
                         [["crash", o, i] if o else ["unimplemented", "ridge.py::fit", i]
                          for (_, o, _), i in zip(rows, ids, strict=True)])
    texts = [t for t, _, _ in rows]
    add_embeddings(store, texts, lsa_vectors(texts, dim=2))
    add_clustering(store, "cl-impl", "implementation", ids, [c for *_, c in rows])
    taxonomy = build(store, BuildParams(assign_threshold=0.99, merge_threshold=0.99))
    crash = [t for t in taxonomy.types if t.name.startswith("Crash")]
    assert [t.name for t in crash] == ["Crash in agent code"] and crash[0].n_insights == 2
    assert objects_text(objects_of(store, taxonomy.id)[crash[0].id]) == \
        "squared_distances in kmeans.py, RidgeRegression.__init__ in ridge.py"

"""Failure types by kind on a hand-made store: a cluster that mixes kinds becomes one type per kind, an outlier of a
known kind lands in a type of its kind, a large type naming several objects is split by object, names come from
kind and shared object, and later insights are assigned only to types of their kind."""

from __future__ import annotations

import numpy as np

from failatlas.taxonomy import BuildParams, assign_insights
from failatlas.taxonomy import run as build
from failatlas.taxonomy.facets import facet_name
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
     "kmeans.py::fit", 1),
    ("Masked function `kmeans.py::init` left unimplemented (NotImplementedError)", "unimplemented",
     "kmeans.py::init", 1),
    ("Masked function `kmeans.py::step` left unimplemented (NotImplementedError)", "unimplemented",
     "kmeans.py::step", 1),
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


def test_types_split_by_kind_place_outliers_by_kind_and_are_named_by_kind_and_object(store):
    ids = _store(store)
    taxonomy = build(store, BuildParams(assign_threshold=0.99, merge_threshold=0.99))
    types = _types(store, taxonomy.id)
    assert all(len(kinds) == 1 for _, _, kinds, _, _ in types)
    by_name = {name: (texts, methods) for _, name, _, texts, methods in types}
    # cluster 0 held two kinds: two types; the outlier `experiment` joined the type of its kind
    assert by_name["Required module never created: experiment, torch_utils"][0] == [
        "Module `experiment` that the task masked was never created",
        "Module `torch_utils` of the repository was never created"]
    # the outlier of a kind no cluster holds forms a type of its own
    assert by_name["Wrong result value: accuracy"] == (["Metric `accuracy` is 35% off its expected value"],
                                                      ["facet"])
    # the five unimplemented functions hold over 40% of the phase and name two files: split by file's objects
    unimplemented = sorted(n for n in by_name if n.startswith("Masked part left unimplemented"))
    assert unimplemented == ["Masked part left unimplemented: fit in kmeans.py",
                             "Masked part left unimplemented: fit in ridge.py",
                             "Masked part left unimplemented: init in kmeans.py",
                             "Masked part left unimplemented: score in ridge.py",
                             "Masked part left unimplemented: step in kmeans.py"]
    assert "Dependency not installed: torch, torchvision" in by_name
    # every type has a known kind: categories by entry point, then by kind
    categories = dict(store.query(
        "SELECT t.name, c.name FROM failure_types t JOIN failure_categories c ON c.taxonomy_id = t.taxonomy_id"
        " AND c.id = t.category_id WHERE t.taxonomy_id = ?", [taxonomy.id]))
    assert {n for n, c in categories.items() if c == "Missing implementation component"} == {
        *unimplemented, "Required module never created: experiment, torch_utils"}
    assert "Wrong result value: accuracy" not in categories and "Dependency not installed: torch, torchvision" \
        not in categories  # alone of their entry point or kind: no category
    # a later insight is assigned only among the types of its kind: no crash type exists, so it fits none
    summary = assign_insights(store, taxonomy.id, [ids[-1]], threshold=-1.0)
    assert summary.unassigned == {"execution": 1} and summary.assigned == {}


def test_facet_names_say_what_the_objects_share():
    assert facet_name("dependency_not_installed", ["scikit-learn-extra"] * 3) == \
        "Dependency not installed: scikit-learn-extra"
    assert facet_name("unimplemented", ["kmeans.py::fit", "kmeans.py::init"]) == \
        "Masked part left unimplemented in kmeans.py"
    assert facet_name("crash", ["a.py::f", "b.py::g"]) == "Crash in agent code: f in a.py, g in b.py"
    assert facet_name("crash", ["a.py::f", None]) == "Crash in agent code"
    assert facet_name("conclusion_missing", ["conclusion"]) == "No conclusion written"
    assert facet_name("wrong_value", [f"m{i}" for i in range(9)]) == "Wrong result value"
    assert np.all([isinstance(facet_name(k, []), str) for k in ("unknown", "crash")])

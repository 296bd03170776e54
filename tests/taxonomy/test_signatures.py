"""Too-broad types are split by error signature, and offline names state the failure."""

from __future__ import annotations

import numpy as np

from failatlas.store import Store
from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labelling.phrases import BARE_TOKENS, failure_name
from failatlas.taxonomy.signatures import error_signature, split_by_signature
from tests.taxonomy.fill import add_clustering, add_embeddings, add_insights

MIXED = [
    "Hidden test failed: NotImplementedError raised in the masked function compute_loss",
    "NotImplementedError left in the masked function train_step, the hidden test failed",
    "The masked function evaluate still raises NotImplementedError",
    "Hidden test failed with IndexError: list index out of range in the data loader",
    "IndexError: index 10 is out of bounds in the data loader of the hidden test",
    "The data loader raised IndexError: list index out of range",
    "AssertionError in the hidden test: output shape differs from the expected shape",
    "Hidden test AssertionError: expected shape (4, 10) but got (10, 4)",
    "AssertionError: wrong output shape in the hidden test",
]


def test_error_signature_and_split():
    assert error_signature("Traceback ... ModuleNotFoundError: No module named 'torch'") == "ModuleNotFoundError"
    assert error_signature("an Error happened") is None
    vectors = np.tile(np.eye(4)[0], (9, 1)).astype(np.float32)
    parts = split_by_signature(MIXED, vectors)
    assert sorted(len(p) for p in parts) == [3, 3, 3]
    assert [sorted(MIXED[i] for i in p) for p in parts][0][0].count("Error") >= 1
    assert len(split_by_signature(MIXED[:3] + ["no signature at all"], vectors[:4])) == 1  # one signature: one type


def test_a_cluster_of_three_exceptions_becomes_three_named_types(store: Store):
    texts = MIXED + [
        "ModuleNotFoundError: No module named 'torch' when running train.py",
        "ModuleNotFoundError: no module named torchvision, the package is not installed",
        "Python package not installed: ModuleNotFoundError for scipy",
    ]
    rows = [{"phase": "implementation", "text": t, "run_id": f"r{k}"} for k, t in enumerate(texts)]
    ids = add_insights(store, rows)
    rng = np.random.default_rng(0)
    base = rng.normal(size=16)
    other = rng.normal(size=16)
    vectors = np.stack([base + 0.05 * rng.normal(size=16) for _ in MIXED] + [other + 0.05 * rng.normal(size=16)
                                                                          for _ in range(3)])
    add_embeddings(store, texts, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    add_clustering(store, "cl-mixed", "implementation", ids, [0] * 9 + [1] * 3)
    tax = build(store, BuildParams(clustering_ids=["cl-mixed"]))
    assert len(tax.types) == 4  # the mixed cluster split three ways, the import cluster kept
    names = [t.name for t in tax.types]
    for sig in ("NotImplementedError", "IndexError", "AssertionError", "ModuleNotFoundError"):
        assert sum(sig in n for n in names) == 1, names
    for n in names:
        assert not set(n.lower().replace(":", " ").split()) <= BARE_TOKENS
    # a category groups two or more types under a name none of them has
    for c in tax.categories:
        members = [t.name for t in tax.types if t.category_id == c.id]
        assert len(members) >= 2 and c.name not in members


def test_failure_names_are_phrases_not_keyword_pairs():
    texts = [
        "The system failed to include the required '<end_plan>' tag after the plan.",
        "The system failed to include the required <end_plan> tag at the end of the generated plan.",
        "The LLM failed to include the required `<end_plan>` tag at the end of its plan",
    ]
    name = failure_name(texts, ["The system called page_down with incorrect arguments"])
    assert name.lower().startswith("failed to include the required end_plan") and " / " not in name
    assert failure_name(["ModuleNotFoundError: x", "ModuleNotFoundError: y"]) == "ModuleNotFoundError raised"
    assert failure_name(["py", "py"], [], ["py", "python"]) == "Unclassified failures"

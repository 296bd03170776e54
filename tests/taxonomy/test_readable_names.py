"""Readable names: every shipped name generator (the offline labeller, the LLM labeller, the split edit's names)
refuses a fragment that ends mid-clause, a code token, a file name, an exception message or a bare topic; what
cannot be named readably says so (labelling/readable.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from failatlas.taxonomy import BuildParams, make_labeller
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labelling import LLMLabeller
from failatlas.taxonomy.labelling.readable import unreadable_reason
from failatlas.taxonomy.model import TypeEvidence
from tests.taxonomy.test_llm_labeller import FakeResult, FakeStructuredLLM

# the unreadable names the issue quotes from the unsupervised GAIA taxonomy, and shapes of the same kinds
FRAGMENTS = {
    "Did not follow the instructions that say": "ends mid-clause",
    "The agent wrote the plan to": "ends mid-clause",
    "Triple quotes": "topic, not a failure",
    "Async def": "code token",
    "File path": "says nothing specific",
    "Final answer": "says nothing specific",
    "Error occurred": "says nothing specific",
    "Shard and file": "topic, not a failure",
    "Patch and apply": "topic, not a failure",
    "run_experiment.py": "file name",
    "config.yaml": "file name",
    "`final_answer()`": "code token",
    "visit_page": "code token",
    "KeyError: 'choices'": "exception message",
    "ModuleNotFoundError(\"No module named 'torch'\")": "exception message",
    "Traceback (most recent call last)": "exception message",
    "'Connection aborted.'": "quoted message",
    "": "empty",
}
READABLE = ["Output not in the required format", "Instructions not followed", "Formatting Errors", "Timeout",
            "Missing the end_plan tag required by the prompt", "Hallucinated tool output", "Goal deviation",
            "Search failures (search)", "Rate limiting", "Final answer failures", "Agent looped on the same search"]


@pytest.mark.parametrize(("name", "reason"), sorted(FRAGMENTS.items()))
def test_fragment_shapes_are_refused_with_their_reason(name, reason):
    assert unreadable_reason(name) == reason


@pytest.mark.parametrize("name", READABLE)
def test_failure_noun_phrases_pass(name):
    assert unreadable_reason(name) is None


def _evidence(texts: list[str], key: str = "execution/T01") -> TypeEvidence:
    return TypeEvidence(key=key, phase="execution", insight_ids=[f"i{k}" for k in range(len(texts))], texts=texts,
                        similarities=np.linspace(0.9, 0.5, len(texts)), keywords=["async", "def"])


@pytest.mark.parametrize("shape", ["Async def", "Did not follow the instructions that say", "config.yaml",
                                   "KeyError: 'choices'", "Triple quotes"])
def test_the_llm_labeller_cannot_print_a_fragment(mini_store, shape):
    def reply(messages, schema):  # noqa: ANN001, ANN202
        body = json.loads(messages[1]["content"])
        if schema["title"] == "LLMCategoryLabel":
            value = {"name": shape, "definition": "A category."}
        else:
            value = {"name": shape, "definition": "A definition sentence here.", "inclusion_criteria": ["a"],
                     "exclusion_criteria": ["b"], "representative_example_ids": [body["INSIDE"][0]["id"]]}
        return FakeResult(ok=True, value=value, raw=json.dumps(value))

    for labeller in (LLMLabeller(FakeStructuredLLM(reply)),
                     make_labeller("llm", client=FakeStructuredLLM(reply))):
        tax = build(mini_store, BuildParams(labeller="llm"), labeller=labeller)
        assert tax.types and all(unreadable_reason(t.name) is None for t in tax.types)
        assert all(t.name.startswith("Unnamed type ") and t.id in t.name for t in tax.types)
        assert all("No readable name was found" in t.definition and t.examples for t in tax.types)
        assert not [c for c in tax.categories if c.naming_method == "llm"]  # an unreadable category is none


def test_the_offline_labeller_never_names_a_type_by_a_fragment():
    labeller = make_labeller("offline")
    cases = [
        ["Did not follow the instructions that say"] * 4,
        ["async def", "async def main():", "async def run():"],
        ["config.yaml", "config.yaml", "config.yaml"],
        ["KeyError: 'choices'", "KeyError: 'choices'", "KeyError: 'choices'"],
        ["The agent used triple quotes", "Triple quotes", "triple quotes again"],
    ]
    for texts in cases:
        lab = labeller.label(_evidence(texts))
        assert unreadable_reason(lab.name) is None, (texts, lab.name)


def test_every_name_of_a_real_taxonomy_is_readable_or_says_it_is_not(trail_store):
    from tests.taxonomy.conftest import TRAIL_PARAMS

    tax = build(trail_store, TRAIL_PARAMS)
    for t in tax.types:
        assert unreadable_reason(t.name) is None, t.name
    for c in tax.categories:
        assert unreadable_reason(c.name) is None, c.name

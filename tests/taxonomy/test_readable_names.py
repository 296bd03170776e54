"""Readable names: every shipped name generator (the offline labeller, the LLM labeller, the split edit's names)
refuses a fragment that ends mid-clause, a code token, a file name, an exception message or a bare topic; what
cannot be named readably says so (labelling/readable.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from failatlas.taxonomy import BuildParams, make_labeller
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labelling import LLMLabeller
from failatlas.taxonomy.labelling.readable import REASON_CLAUSES, fragment, unreadable_reason, withheld_note
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
    # two keywords glued with 'and' (TRAIL GAIA, --seed trail): a word on both sides is no phrase anyone wrote
    "Abuse and abuse available": "repeats a word",
    "Timeout and timeout retries": "repeats a word",
}
# TRAIL GAIA's two keyword-pair names, as (keywords, member statements that share no phrase): the offline generator
# must not glue the keywords ("Information and access file" repeats no word, but no member says it)
KEYWORD_PAIRS = {
    ("abuse", "abuse available"): [
        "Resource abuse detected by the provider, rate limit hit", "The tool reported abuse; no results available",
        "Abuse filter blocked the search request", "Search quota abuse made the API unavailable"],
    ("information", "access file"): [
        "Could not access the file the task named", "The information in the PDF was never read",
        "File access failed so the numbers were guessed", "Wrong information extracted from the spreadsheet"],
}
READABLE = ["Search and replace failed", "Formatting and output errors",
            "Output not in the required format", "Instructions not followed", "Formatting Errors", "Timeout",
            "Missing the end_plan tag required by the prompt", "Hallucinated tool output", "Goal deviation",
            "Search failures (search)", "Rate limiting", "Final answer failures", "Agent looped on the same search"]


@pytest.mark.parametrize(("name", "reason"), sorted(FRAGMENTS.items()))
def test_fragment_shapes_are_refused_with_their_reason(name, reason):
    assert unreadable_reason(name) == reason


@pytest.mark.parametrize("name", READABLE)
def test_failure_noun_phrases_pass(name):
    assert unreadable_reason(name) is None


def test_every_reason_has_a_clause_and_the_withheld_note_reads_as_a_sentence():
    """The note a withheld name's definition opens with, for every reason `unreadable_reason` gives (the note once
    read "the phrase they share, 'File path', is a says nothing specific")."""
    assert set(FRAGMENTS.values()) | {"starts mid-clause", "is a clause"} == set(REASON_CLAUSES)  # + `fragment`'s
    expected = {
        "File path": "(the name proposed for them, 'File path', says nothing specific)",
        "Async def": "(the name proposed for them, 'Async def', is a code token)",
        "config.yaml": "(the name proposed for them, 'config.yaml', is a file name)",
        "KeyError: 'choices'": "(the name proposed for them, 'KeyError: 'choices'', is an exception message)",
        "'Connection aborted.'": "(the name proposed for them, ''Connection aborted.'', is a quoted message)",
        "The agent wrote the plan to": "(the name proposed for them, 'The agent wrote the plan to', ends mid-clause)",
        "Triple quotes": "(the name proposed for them, 'Triple quotes', names a topic, not a failure)",
        "Abuse and abuse available":
            "(the name proposed for them, 'Abuse and abuse available', joins a word to itself with 'and')",
        "": "(they share no phrase to name them by)",
        "Is not installed": "(the name proposed for them, 'Is not installed', starts mid-clause)",
        "Error was with the formatting":
            "(the name proposed for them, 'Error was with the formatting', is a clause, not a name)",
    }
    for name, clause in expected.items():
        note = withheld_note(name, fragment(name))
        assert note == f"No readable name was found for these statements {clause}; read the examples. ", note
    for name, reason in FRAGMENTS.items():
        note = withheld_note(name, reason)
        assert not re.search(r"\b(is a (says|ends|empty|exception|names|joins)|is an? is)\b", note), note


def _evidence(texts: list[str], key: str = "execution/T01", keywords: tuple[str, ...] = ("async", "def")
              ) -> TypeEvidence:
    return TypeEvidence(key=key, phase="execution", insight_ids=[f"i{k}" for k in range(len(texts))], texts=texts,
                        similarities=np.linspace(0.9, 0.5, len(texts)), keywords=list(keywords))


@pytest.mark.parametrize("shape", ["Async def", "Did not follow the instructions that say", "config.yaml",
                                   "KeyError: 'choices'", "Triple quotes", "Abuse and abuse available"])
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
    for keywords, texts in KEYWORD_PAIRS.items():  # no phrase shared word for word: never the keywords glued;
        lab = labeller.label(_evidence(texts, keywords=keywords))  # a run of a central statement, or honest
        assert " and " not in lab.name and unreadable_reason(lab.name) is None, (keywords, lab.name)
        if lab.name.startswith("Unnamed type"):
            assert lab.definition.startswith("No readable name was found for these statements (they share no phrase")
            assert "Unnamed type" not in lab.definition  # the definition says so without the placeholder
        else:  # issue 53: named by content only where most of its words are in half of the statements or more
            words = {w.lower() for w in lab.name.split()}
            assert sum(len(words & set(t.lower().split())) >= len(words) / 2 for t in texts) >= len(texts) / 2
        assert not any(" and " in c and "Inside" in c for c in lab.inclusion_criteria), lab.inclusion_criteria


def test_every_name_of_a_real_taxonomy_is_readable_or_says_it_is_not(trail_store):
    from tests.taxonomy.conftest import TRAIL_PARAMS

    tax = build(trail_store, TRAIL_PARAMS)
    for t in tax.types:
        assert unreadable_reason(t.name) is None, t.name
    for c in tax.categories:
        assert unreadable_reason(c.name) is None, c.name

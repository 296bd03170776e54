"""Too-broad types are split by error signature, and offline names state the failure."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert failure_name(["py", "py"], [], ["py", "python"]) == ""  # no phrase: `ReadableNames` names it honestly


def test_a_name_is_not_cut_short_before_its_object_or_head_noun():
    texts = [
        "The system deviated from the planned steps by answering directly.",
        "The system deviated from the planned steps and guessed the answer.",
        "The agent deviated from the planned steps, skipping the search.",
        "The system deviated from the planned approach of searching first.",
    ]
    assert failure_name(texts) == "Deviated from the planned steps"
    # a tool name and the word 'tool' only say what was involved: the name says what went wrong with it
    calls = [
        "The system called the page_down tool with incorrect arguments {'': ''}.",
        "The system called the page_down tool with incorrect arguments again.",
        "Again the page_down tool was called with incorrect arguments; it takes none.",
        "The page_down tool takes no arguments but was given one.",
    ]
    assert failure_name(calls, ["The system called final_answer too early."]) == "Incorrect arguments"


def test_names_keep_negations_and_leave_out_paths_and_cited_passages():
    texts = [
        "The plan didn't use any tools to look the figure up.",
        "The model did not use any tools and guessed the number.",
        "The model didn’t use any tools, so the answer is unverified.",
    ]
    assert failure_name(texts) == "Did not use any tools"
    paths = [
        "Could not open data/gaia/validation/1f97.mp3 because the file is missing.",
        "Could not open data/gaia/validation/2b3e.pdf because the file is missing.",
        "Could not open C:\\data\\gaia\\validation\\x.txt because the file is missing",
    ]
    name = failure_name(paths)
    assert "gaia" not in name.lower() and "validation" not in name.lower(), name
    cited = [
        'The answer ignored the instruction "answers without sources will not be tolerated here".',
        'The answer ignored the instruction "answers without sources will not be tolerated at all".',
        "The answer ignored the instruction to cite sources.",
    ]
    name = failure_name(cited)
    assert "tolerated" not in name.lower() and "ignored the instruction" in name.lower(), name


def test_a_category_is_named_by_what_two_or_more_of_its_types_share():
    from failatlas.taxonomy.labelling.offline import OfflineLabeller
    from failatlas.taxonomy.model import CategoryEvidence

    groups = [
        ["The system ignored the plan and called page_down with incorrect arguments."] * 3,
        ["The system ignored the plan and answered from memory."] * 3,
        ["The system ignored the plan, skipping the search_agent."] * 2,
    ]
    evidence = CategoryEvidence(
        key="other/C1", phase="other", type_names=["Incorrect arguments", "Answered from memory", "Skipped"],
        type_definitions=["-"] * 3, keywords=["page_down", "plan"], texts=[t for g in groups for t in g],
        other_categories=[["Formatting"]], type_texts=groups,
        contrast_texts=["The output was missing the end_plan tag."] * 4,
    )
    assert OfflineLabeller().label_category(evidence).name == "Ignored the plan"
    # nothing shared that states a failure: a word the types share, never a tool identifier
    plain = [["The page_down tool returned nothing for the page."] * 3, ["The visit_page tool hung on the page."] * 3]
    evidence.type_texts, evidence.texts, evidence.type_names = plain, [t for g in plain for t in g], ["A", "B"]
    name = OfflineLabeller().label_category(evidence).name
    assert name.endswith(" failures") and "_" not in name, name
    # nothing shared at all: no name more general than the types' (the build lets them stand alone)
    apart = [["Accessed the ground-truth files."], ["Reported numbers it never produced."]]
    evidence.type_texts, evidence.texts = apart, [t for g in apart for t in g]
    evidence.type_names = ["Accessed ground-truth files", "Reported results it did not produce"]
    assert OfflineLabeller().label_category(evidence) is None


def test_a_phrase_only_a_few_members_say_does_not_name_the_type():
    """The most contrastive phrase is said by 2 of 14 insights (the neighbours say 'final answer' too): the
    type is named by what most of its insights are about."""
    verbs = ["returned", "gave", "sent", "produced", "wrote", "posted", "printed", "stated", "typed", "chose",
             "formed", "built"]
    texts = [f"Then {v} final answer {k}." for k, v in enumerate(verbs)]
    texts += ["The final answer reflects a misunderstanding of how to format numbers."] * 2
    contrast = ["The final answer was given after the search."] * 6
    assert failure_name(texts, contrast) == "Final answer failures"
    # said by enough of them, the contrastive phrase names the type
    texts = texts[:8] + ["The final answer reflects a misunderstanding of how to format numbers."] * 6
    assert failure_name(texts, contrast).startswith("Reflects a misunderstanding of how to format")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab /\\\"“”’'_-.,:;()n't404\n")), max_size=200),
                min_size=1, max_size=6))
def test_naming_never_fails_on_any_text(texts):
    """Quotes, paths, apostrophes and separators in any arrangement: a name (or a category name, or none) comes
    back, never an exception."""
    from failatlas.taxonomy.labelling.offline import _shared_term
    from failatlas.taxonomy.labelling.phrases import shared_phrase, shared_word

    assert isinstance(failure_name(texts, texts[:1], ["py"]), str)  # '' where no phrase names it
    shared_phrase([texts, texts[::-1]], texts, texts)
    shared_word([texts, texts], texts)
    _shared_term(texts)


def test_negations_quotes_and_paths_in_the_forms_annotators_write_them():
    from failatlas.taxonomy.labelling.phrases import _unpath, _words_of_clauses, best_phrase

    assert best_phrase(["The agent answered without checking the source page."] * 4).startswith("answered without")
    assert "not" in best_phrase(["The agent did not even attempt to verify the result."] * 4).split()
    assert "not call" in best_phrase(["The agent DIDN'T call the search tool."] * 3).lower()
    # a quote opens at a word's start and closes at a word's end: inches and JSON cite nothing
    words = _words_of_clauses('The screen is 5" wide, yet the agent failed to convert the units and printed "done".')
    assert ["yet", "the", "agent", "failed", "to", "convert", "the", "units", "and", "printed", "done"] in words
    assert _words_of_clauses('He wrote “this will not be tolerated at all” and stopped')[0] == ["He", "wrote"]
    # a path has a path's shape; "input/output" and "and/or" are words
    assert _unpath("input/output and/or JSON/YAML") == "input/output and/or JSON/YAML"
    assert _unpath("open data/gaia/x.mp3 or ./run.sh or https://x.org").split() == ["open", "|", "or", "|", "or", "|"]


def test_category_terms_are_nouns_not_verb_phrases():
    from failatlas.taxonomy.labelling.offline import _modifier, _shared_term

    assert _shared_term(["Did not use any tools", "Did not use any tools #2"]) is None
    assert _shared_term(["Formatting of numbers", "Formatting of dates"]) == "formatting"  # a gerund is a noun
    assert _shared_term(["NotImplementedError: hidden test", "IndexError: hidden test"]) == "hidden test"
    assert _shared_term(["Accessed ground-truth files", "Reported results"]) is None
    assert [_modifier(w) for w in ["Results", "Files", "Queries", "Indices", "Series", "Processes"]] == [
        "Result", "File", "Queries", "Indices", "Series", "Processes"]

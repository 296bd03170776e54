import re

from hypothesis import given, settings
from hypothesis import strategies as st

from failatlas.ingest import error_sentences, split_sentences


def _non_space(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_splits_at_sentence_ends_but_not_abbreviations_initials_or_numbers():
    text = (
        "The agent used Adam instead of SGD, e.g. in train.py. It skipped the ablation (see Fig. 3). "
        "J. Smith's baseline was 3.5 vs. 4.2 in the paper! Was the seed fixed? No."
    )
    assert split_sentences(text) == [
        "The agent used Adam instead of SGD, e.g. in train.py.",
        "It skipped the ablation (see Fig. 3).",
        "J. Smith's baseline was 3.5 vs. 4.2 in the paper!",
        "Was the seed fixed?",
        "No.",
    ]


def test_list_items_and_blank_lines_are_boundaries():
    text = "Problems:\n- Missing baseline\n- Wrong metric: accuracy\n1. No seeds set. 2. One run only\n\nN/A"
    assert split_sentences(text) == [
        "Problems:",
        "- Missing baseline",
        "- Wrong metric: accuracy",
        "1. No seeds set.",
        "2. One run only",
        "N/A",
    ]


def test_error_sentences_drop_markers_and_no_error_statements():
    text = "- Missing baseline.\n- N/A\n\nNo errors found. The output is correct. Used 1 seed."
    assert error_sentences(text) == ["Missing baseline.", "Used 1 seed."]
    assert error_sentences("None") == []
    assert error_sentences("") == []
    assert error_sentences(None) == []


def test_praise_only_sentences_are_not_errors_but_mixed_ones_are():
    text = (
        "The design correctly identifies the independent variable. The metric matches the paper. "
        "The design correctly varies depth but never varies width. The conclusion is correct, although "
        "it ignores the error bars."
    )
    assert error_sentences(text) == [
        "The design correctly varies depth but never varies width.",
        "The conclusion is correct, although it ignores the error bars.",
    ]


def test_empty_and_whitespace_only_text_give_no_sentences():
    assert split_sentences("") == []
    assert split_sentences(" \n\t ") == []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcXYZ019 .!?\n-*()\"'e.g:;")) | st.characters(), max_size=200))
def test_split_sentences_never_loses_non_whitespace_characters(text):
    pieces = split_sentences(text)
    assert _non_space("".join(pieces)) == _non_space(text)
    assert all(piece == piece.strip() and piece for piece in pieces)

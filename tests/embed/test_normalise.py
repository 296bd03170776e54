from __future__ import annotations

import pytest

from failatlas.core.errors import ConfigError
from failatlas.embed.normalise import get_normaliser

mask = get_normaliser("mask").normalise_one


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("loss was 0.35 after 1,200 steps (12%)", "loss was <num> after <num> steps (<num>)"),
        ("could not read /home/agent/data/train.csv", "could not read <path>"),
        ("wrote results.json and config.yaml", "wrote <path> and <path>"),
        ("called search_agent then page_down", "called <id> then <id>"),
        ("used model.fit() and torch.nn.Linear", "used <id>() and <id>"),
        ("calls getUserName on FooBarBaz", "calls <id> on <id>"),
        ('the answer "Key Biscayne, Florida" was wrong', "the answer <value> was wrong"),
        ("ran `pip install foo` twice", "ran <value> twice"),
        ("passed {'': {}} as kwargs", "passed <object> as kwargs"),
        ("see https://example.org/a?b=1 for details", "see <url> for details"),
        ("commit 3fa9b2c1d4e5 broke it", "commit <id> broke it"),
    ],
)
def test_mask_replaces_task_specific_tokens(text, expected):
    assert mask(text) == expected


def test_mask_keeps_error_class_names_and_plain_words():
    text = "KeyError and ModuleNotFoundError, e.g. when the plan was ignored"
    assert mask(text) == text


def test_identity_and_unknown_names():
    assert get_normaliser(False)(["a 1"]) == ["a 1"]
    assert get_normaliser(True).name.startswith("mask-v")
    with pytest.raises(ConfigError):
        get_normaliser("stem")

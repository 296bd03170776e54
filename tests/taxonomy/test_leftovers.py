"""Definitions without leftovers (issue 53): no placeholder ("Unnamed type other/T01"), no fragment listed as a
name ("Is not installed"), no clause as a name, in any definition of a real taxonomy of TRAIL GAIA (unseeded and
seeded); and `taxonomy show --quality` names its evaluation set honestly."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.label_quality import evaluation_set
from failatlas.taxonomy.labelling.readable import fragment
from failatlas.taxonomy.leftovers import leftovers
from failatlas.taxonomy.seeding import load_seed


@pytest.mark.parametrize(("definition", "found"), [
    ("2 failure type(s): Tool failures; Unnamed type monitor/T01 (no readable common phrase).", "placeholder"),
    ("Crash (3 insights). Not inside: Is not installed; Wrong values (the nearest other types).", "fragment"),
    ("2 failure type(s): Error was with the formatting; Wrong values.", "fragment"),
    ('Timeout (2 insights), e.g. "".', "empty example"),
])
def test_leftovers_are_found(definition: str, found: str):
    assert any(x.startswith(found) for x in leftovers(definition)), leftovers(definition)


def test_clean_definitions_have_none():
    assert leftovers('Failed to include the required end_plan tag (30 other insights), e.g. "The agent failed to'
                     ' include the <end_plan> tag."') == []
    assert leftovers("2 failure type(s): Not Found error; Package not installed.") == []
    assert fragment("Is not installed") == "starts mid-clause" and fragment("Package is not installed") is None
    assert fragment("Error was with the formatting") == "is a clause"


def test_no_definition_of_a_gaia_taxonomy_has_leftovers(trail_store, trail_template):
    from tests.taxonomy.conftest import TRAIL_PARAMS
    from tests.taxonomy.test_seeded import TrailSpaceEmbedder

    embedder = TrailSpaceEmbedder(trail_template.embed)
    for params in (TRAIL_PARAMS, TRAIL_PARAMS.model_copy(update={"seed_taxonomy": load_seed("trail")})):
        tax = build(trail_store, params, embedder=embedder)
        found = [(t.id, t.name, x) for t in tax.types for x in leftovers(t.definition)]
        found += [(c.id, c.name, x) for c in tax.categories for x in leftovers(c.definition)]
        assert found == []
        assert all(fragment(t.name) is None for t in tax.types if not t.name.startswith("Unnamed type")), \
            [t.name for t in tax.types]


def test_the_evaluation_set_is_named_for_what_it_is(tmp_path):
    examples = tmp_path / "examples.jsonl"
    examples.write_text("".join(json.dumps({"text": t, "label": "X"}) + "\n" for t in ("seen one", "seen two")))
    tax = SimpleNamespace(params=SimpleNamespace(examples=[str(examples)]))
    held = evaluation_set(tax, ["another dataset's statement", "and another"])
    assert held["held_out"] and held["in_sample"] == 0 and held["evaluation"].startswith("held out: 2 distinct")
    inside = evaluation_set(tax, ["seen one", "not seen"])
    assert not inside["held_out"] and inside["in_sample"] == 1
    assert inside["evaluation"].startswith("in-sample for 1 of 2 distinct statements")
    plain = evaluation_set(SimpleNamespace(params=SimpleNamespace(examples=[])), ["a"])
    assert plain["held_out"] and "nothing was learned from these labels" in plain["evaluation"]
    gone = evaluation_set(SimpleNamespace(params=SimpleNamespace(examples=[str(tmp_path / "moved.jsonl")])), ["a"])
    assert gone["held_out"] is None and "cannot be told" in gone["evaluation"]


def test_no_definition_of_a_demo_shaped_taxonomy_has_leftovers(store):
    from tests.taxonomy.test_label_scope import _demo_like

    _demo_like(store)
    tax = build(store, BuildParams())
    assert [(t.id, x) for t in tax.types for x in leftovers(t.definition)] == []
    assert [(c.id, x) for c in tax.categories for x in leftovers(c.definition)] == []
    assert not any(t.name.startswith("Unnamed type") for t in tax.types)

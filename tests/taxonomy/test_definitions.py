"""Definitions fitted to reconstruct their types: the choice among candidate definitions, and the build that uses
it (name fidelity as `taxonomy show --quality` measures it)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from failatlas.cluster.metrics import name_fidelity
from failatlas.taxonomy import run as build
from failatlas.taxonomy.definitions import CANDIDATES, DefinitionSlot, fit_definitions, name_text, with_examples
from failatlas.taxonomy.evaluate import evaluate_taxonomy
from failatlas.taxonomy.seeding import load_seed
from tests.taxonomy.conftest import TRAIL_PARAMS
from tests.taxonomy.test_seeded import TrailSpaceEmbedder

WORDS = ["timeout", "page", "load", "slow", "quota", "key", "denied", "auth", "format", "tag", "plan", "missing"]


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A fake for the sentence model: unit word-count vectors over a fixed vocabulary (plus one shared axis, so
    that no text is a zero vector)."""
    out = np.zeros((len(texts), len(WORDS) + 1), dtype=np.float32)
    for r, text in enumerate(texts):
        for w in re.findall(r"[a-z]+", text.lower()):
            if w in WORDS:
                out[r, WORDS.index(w)] += 1.0
        out[r, -1] = 0.5
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _slots(texts_by_type: dict[str, list[str]], definitions: dict[str, str], heads: dict[str, str | None]):
    slots, vectors, assigned = [], [], []
    for g, (name, texts) in enumerate(texts_by_type.items()):
        v = bag_of_words(texts)
        slots.append(DefinitionSlot(name=name, definition=definitions[name], head=heads[name], texts=texts, vectors=v))
        vectors.append(v)
        assigned += [g] * len(texts)
    return slots, np.concatenate(vectors), np.array(assigned)


def test_the_fitted_definitions_reconstruct_their_types_where_the_labellers_did_not():
    texts = {
        "Timeouts": ["page load timeout", "slow page load timeout", "timeout on load", "quota timeout"],
        "Auth": ["auth key denied", "denied key", "auth denied quota", "key missing auth"],
        "Format": ["format tag missing", "plan tag missing", "missing format tag in plan", "tag format"],
    }
    # the labeller's definitions quote the wrong insights (Timeouts' quotes are about quotas and keys)
    definitions = {
        "Timeouts": with_examples("Timeouts", ["quota key denied", "key quota"]),
        "Auth": with_examples("Auth", ["denied", "auth"]),
        "Format": "An LLM wrote this whole: quota quota quota.",
    }
    heads = {"Timeouts": "Timeouts", "Auth": "Auth", "Format": None}
    slots, vectors, assigned = _slots(texts, definitions, heads)
    before_vectors = bag_of_words([name_text(s.name, s.definition) for s in slots])
    before = name_fidelity(vectors, assigned, before_vectors)["fidelity"]

    fitted, reported_before, after = fit_definitions(slots, vectors, assigned, bag_of_words)

    assert reported_before == pytest.approx(before) and after > before
    after_vectors = bag_of_words([name_text(s.name, d) for s, d in zip(slots, fitted, strict=True)])
    assert name_fidelity(vectors, assigned, after_vectors)["fidelity"] == pytest.approx(after)  # the metric itself
    assert fitted[2] == definitions["Format"]  # a definition written whole is never rewritten
    assert fitted[0] != definitions["Timeouts"] and fitted[0].startswith("Timeouts, e.g. ")
    quoted = re.findall(r'"([^"]+)"', fitted[0])
    assert quoted and set(quoted) <= set(texts["Timeouts"])  # representatives are the type's own insights


def test_fitting_never_lowers_fidelity_and_keeps_a_definition_that_is_already_best():
    texts = {"Timeouts": ["page load timeout", "timeout slow"], "Auth": ["auth key denied", "denied key"]}
    definitions = {n: with_examples(n, t) for n, t in texts.items()}
    slots, vectors, assigned = _slots(texts, definitions, {n: n for n in texts})
    fitted, before, after = fit_definitions(slots, vectors, assigned, bag_of_words)
    assert before == after == 1.0 and fitted == [definitions["Timeouts"], definitions["Auth"]]
    assert len(CANDIDATES) == 12  # the candidate set is fixed, not searched per data set


def _fidelity_note(store, taxonomy_id: str) -> dict:
    (summary,) = store.query("SELECT summary FROM stage_runs WHERE id = ?", [f"taxonomy.build:{taxonomy_id}"])[0]
    return json.loads(summary)


def test_a_seeded_build_fits_definitions_and_the_quality_report_measures_the_same(trail_store, trail_template):
    embedder = TrailSpaceEmbedder(trail_template.embed)
    params = TRAIL_PARAMS.model_copy(update={"seed_taxonomy": load_seed("trail")})
    assert params.fit_definitions is False  # opt-in: costs 10-20x a build, gains in-sample only
    plain = build(trail_store, params, embedder=embedder)
    fitted = build(trail_store, params.model_copy(update={"fit_definitions": True}), embedder=embedder)
    assert plain.id != fitted.id  # the parameter is part of what names a snapshot

    plain_q = evaluate_taxonomy(trail_store, plain.id, embedder=embedder)
    fitted_q = evaluate_taxonomy(trail_store, fitted.id, embedder=embedder)
    assert fitted_q["name_fidelity"] > plain_q["name_fidelity"]
    assert fitted_q["labels"]["ari"] == pytest.approx(plain_q["labels"]["ari"])  # names change, not members
    note = _fidelity_note(trail_store, fitted.id)
    assert note["definitions_fitted"] is True
    (phase,) = note["name_fidelity_before_after"].values()
    assert phase["before"] == pytest.approx(plain_q["name_fidelity"], abs=1e-4)
    assert phase["after"] == pytest.approx(fitted_q["name_fidelity"], abs=1e-4)

    members = dict(trail_store.query(
        "SELECT insight_id, failure_type_id FROM insight_failure_types WHERE taxonomy_id = ?", [fitted.id]))
    text_of = dict(trail_store.query("SELECT id, text FROM insights"))
    seed_defs = {c.name: c.definition for c in load_seed("trail").categories_for("execution")}
    for t in fitted.types:
        own = {" ".join(text_of[i].split()) for i, tid in members.items() if tid == t.id}
        quoted = [q.removesuffix(" ...") for q in re.findall(r'"(.+?)"(?:; |\.$)', t.definition)]
        assert quoted, t.definition
        assert all(any(o.startswith(q) for o in own) for q in quoted), t.id  # quotes its own members
        if t.origin == "seed":
            assert t.definition.startswith(seed_defs[t.name] + " Here, e.g. ")


def test_without_the_embedding_model_the_build_says_why_definitions_stay_as_labelled(trail_store):
    # the test vectors' model is on no machine
    tax = build(trail_store, TRAIL_PARAMS.model_copy(update={"fit_definitions": True}))
    note = _fidelity_note(trail_store, tax.id)
    assert note["definitions_fitted"] is False and "tfidf-svd-64" in note["definitions_not_fitted_because"]
    unfitted = build(trail_store, TRAIL_PARAMS)
    assert [t.definition for t in tax.types] == [t.definition for t in unfitted.types]


def test_a_definition_quotes_each_representative_once_even_when_two_read_the_same_once_shortened():
    long_a = "The system called the page_down tool with an empty argument " + "a" * 200
    long_b = "The system called the page_down tool with an empty argument " + "b" * 200
    text = with_examples("Head", [long_a, long_b, "short one", "short one", "third"], n=3, limit=80)
    quoted = re.findall(r'"([^"]+)"', text)
    assert len(quoted) == len(set(quoted)) == 3 and quoted[1:] == ["short one", "third"]
    assert text.startswith("Head, e.g. ") and text.endswith('".')

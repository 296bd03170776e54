"""Names chosen so that each type's central statements pick their own type's name (taxonomy/name_choice.py)."""

from __future__ import annotations

import json

import numpy as np

from failatlas.taxonomy import run as build
from failatlas.taxonomy.labelling import OfflineLabeller, make_labeller
from failatlas.taxonomy.labelling.condense import condensed_candidates
from failatlas.taxonomy.labelling.phrases import states_failure
from failatlas.taxonomy.labelling.readable import fragment
from failatlas.taxonomy.model import TypeEvidence, TypeLabel
from failatlas.taxonomy.name_choice import CENTRAL, choose_names, distinct_labels, indistinct_joins
from failatlas.taxonomy.name_fit import name_fit
from tests.taxonomy.conftest import TRAIL_PARAMS
from tests.taxonomy.test_seeded import TrailSpaceEmbedder

# A fake encoder (the real one is the taxonomy's embedding model): each name is a fixed direction.
DIRECTIONS = {
    "Plan deviation": [1.0, 0.0, 0.0],
    "Search failure": [0.0, 1.0, 0.0],
    "Wrong answer format": [0.0, 0.0, 1.0],
    "Search without a query": [0.2, 1.0, 0.0],
    "Answer format": [0.75, 0.0, 0.66],  # A's own statements' words, but B's statements lean to it too
    "Missing end tag": [0.0, 0.3, 1.0],
    "Search near plan": [0.6, 0.8, 0.0],
}


def fake_encode(names: list[str]) -> np.ndarray:
    return np.array([DIRECTIONS[n] for n in names])


def members(*rows: list[float]) -> np.ndarray:
    return np.array(rows, dtype=float)


def test_a_type_takes_the_name_its_own_central_statements_pick_out():
    plan = members([0.9, 0.1, 0.4], [0.8, 0.0, 0.5], [0.9, 0.2, 0.3], [1.0, 0.0, 0.2], [0.85, 0.1, 0.4])
    fmt = members([0.6, 0.0, 0.8], [0.55, 0.1, 0.8], [0.6, 0.0, 0.7], [0.5, 0.0, 0.9], [0.58, 0.0, 0.8])
    # the format type's first name "Answer format" loses its statements to "Plan deviation" half the time and steals
    # the plan type's; "Wrong answer format" and "Missing end tag" are its other names
    options = [["Plan deviation"], ["Answer format", "Wrong answer format", "Missing end tag"]]
    before = choose_names([plan, fmt], [["Plan deviation"], ["Answer format"]], fake_encode)
    result = choose_names([plan, fmt], options, fake_encode)
    assert result.chosen == [0, 1]
    assert result.changed == [1]
    assert sum(result.hits_after) > sum(before.hits_after)
    assert result.hits_after == [5, 5]


def test_no_type_loses_a_statement_to_another_types_new_name():
    search = members([0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.8, 0.6, 0.0], [0.8, 0.6, 0.0], [0.8, 0.6, 0.0])
    plan = members([1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.75, 0.66, 0.0])
    # "Search near plan" would win three more of the search type's statements (7 -> 9 in all), but the plan type
    # would lose one: the search type keeps its name
    first = choose_names([search, plan], [["Search failure"], ["Plan deviation"]], fake_encode)
    other = choose_names([search, plan], [["Search near plan"], ["Plan deviation"]], fake_encode)
    assert first.hits_after == [2, 5] and other.hits_after == [5, 4]
    result = choose_names([search, plan], [["Search failure", "Search near plan"], ["Plan deviation"]], fake_encode)
    assert result.chosen == [0, 0] and result.hits_after == [2, 5]


def test_fixed_names_and_names_another_type_holds_are_kept():
    a = members([1.0, 0.0, 0.0])
    b = members([0.0, 1.0, 0.0])
    result = choose_names([a, b], [["Search failure", "Plan deviation"], ["Plan deviation"]], fake_encode)
    assert result.chosen == [0, 0]  # "Plan deviation" would fit a better, but b holds it


def evidence(texts: list[str], key: str = "other/T01") -> TypeEvidence:
    return TypeEvidence(key=key, phase="other", insight_ids=[f"i{k}" for k in range(len(texts))], texts=texts,
                        similarities=np.linspace(0.9, 0.6, len(texts)), keywords=[])


def test_the_offline_labellers_candidates_are_readable_runs_of_its_statements_its_own_name_first():
    texts = ["The agent failed to include the required end_plan tag after its plan",
             "Missing end_plan tag: the plan was not closed with the required tag",
             "The model forgot the end_plan tag that the system prompt requires after a plan",
             "Plan written without the required closing end_plan tag"]
    labeller = OfflineLabeller()
    ev = evidence(texts)
    found = labeller.candidates(ev)
    assert found and found[0] == labeller.label(ev).name
    assert len(found) > 1 and len({c.lower() for c in found}) == len(found)
    lowered = " ".join(texts).lower()
    for name in found:
        assert fragment(name) is None, name
        assert all(w.lower() in lowered for w in name.replace(":", " ").split()), name
    for name in found[1:]:  # the others say that something went wrong, as the labeller's own does, in one phrase
        assert states_failure(name) and not {"and", "or"} & set(name.lower().split()), name
    relabelled = labeller.label_as(ev, found[-1])
    assert relabelled.name == found[-1] and found[-1] in relabelled.definition


def _build_note(store, taxonomy_id: str) -> dict:
    (summary,) = store.query("SELECT summary FROM stage_runs WHERE id = ?", [f"taxonomy.build:{taxonomy_id}"])[0]
    return json.loads(summary)


def test_a_build_with_its_model_chooses_names_that_more_central_statements_pick_and_says_which(trail_store,
                                                                                            trail_template):
    embedder = TrailSpaceEmbedder(trail_template.embed)
    # a labeller object makes a snapshot of its own each time; the test vectors' model is on no machine: without
    # the embedder the names stay as labelled
    plain = build(trail_store, TRAIL_PARAMS, labeller=make_labeller("offline"))
    assert "tfidf-svd-64" in _build_note(trail_store, plain.id)["names_chosen"]["not_chosen_because"]
    chosen = build(trail_store, TRAIL_PARAMS, labeller=make_labeller("offline"), embedder=embedder)
    note = _build_note(trail_store, chosen.id)["names_chosen"]
    assert "renamed" in note, note
    renamed = note["renamed"]
    assert renamed
    before = {t.id: t.name for t in plain.types}
    after = {t.id: t.name for t in chosen.types}
    assert {r["type"] for r in renamed} == {t for t in after if after[t] != before[t]}
    for r in renamed:
        assert before[r["type"]].startswith(r["labelled"]) and after[r["type"]].startswith(r["chosen"])
        assert fragment(after[r["type"]]) is None
    fit_plain, fit_chosen = name_fit(trail_store, plain, embedder), name_fit(trail_store, chosen, embedder)
    assert fit_chosen["n_fit_by_name_alone"] > fit_plain["n_fit_by_name_alone"]
    joins = _build_note(trail_store, chosen.id)["indistinct_joins"]
    if not joins:  # the same drafts: no type's central statements pick their own name less often
        for t in plain.types:
            assert fit_chosen["per_type"][t.id]["nearest_own"] >= fit_plain["per_type"][t.id]["nearest_own"], t.id


def test_a_build_leaves_no_type_whose_statements_pick_another_types_name(trail_store, trail_template):
    """After a build with its model, no type named by its own statements has most of its central statements
    nearest one other such type's name: that one was joined to it, and the build says so."""
    from failatlas.taxonomy.labelling.readable import is_honest
    from failatlas.taxonomy.name_choice import needed

    embedder = TrailSpaceEmbedder(trail_template.embed)
    loose = TRAIL_PARAMS.model_copy(update={"merge_threshold": 0.99})  # more, smaller clusters to tell apart
    tax = build(trail_store, loose, labeller=make_labeller("offline"), embedder=embedder)
    note = _build_note(trail_store, tax.id)
    joins = note["indistinct_joins"]
    assert joins, "the planted halves of one cluster should be one type"
    for j in joins:
        assert j["central_nearest_into"][0] >= needed(j["central_nearest_into"][1])
    plain = build(trail_store, loose, labeller=make_labeller("offline"))  # no model: nothing is joined
    assert _build_note(trail_store, plain.id)["indistinct_joins"] == []
    assert len(tax.types) == len(plain.types) - len(joins)
    assert sum(t.n_insights for t in tax.types) == sum(t.n_insights for t in plain.types)
    for phase in {t.phase for t in tax.types}:
        mine = [t for t in tax.types if t.phase == phase and not is_honest(t.name)]
        if len(mine) < 2:
            continue
        names = np.asarray(trail_template.embed([t.name for t in mine]), dtype=float)
        names /= np.linalg.norm(names, axis=1, keepdims=True)
        for k, t in enumerate(mine):
            rows = trail_store.query("SELECT i.text FROM insight_failure_types a JOIN insights i ON i.id ="
                                     " a.insight_id WHERE a.taxonomy_id = ? AND a.failure_type_id = ? AND a.method ="
                                     " 'cluster' ORDER BY a.similarity DESC, i.id LIMIT ?", [tax.id, t.id, CENTRAL])
            central = np.asarray(trail_template.embed([r[0] for r in rows]), dtype=float)
            nearest = np.argmax(central @ names.T, axis=1)
            counts = np.bincount(nearest, minlength=len(mine))
            counts[k] = 0
            assert counts.max() < needed(len(rows)) or (nearest == k).sum() >= needed(len(rows)), (t.name, counts)


def test_a_type_no_name_of_its_own_tells_apart_joins_the_type_whose_name_its_statements_pick():
    search = members([0.0, 1.0, 0.0], [-0.1, 1.0, 0.0], [0.0, 1.0, 0.1], [-0.1, 0.9, 0.0], [0.0, 0.9, 0.1])
    query = members([0.0, 1.0, 0.1], [-0.1, 1.0, 0.0], [0.0, 0.9, 0.0], [0.3, 0.9, 0.0], [0.0, 1.0, 0.0])
    plan = members([1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [1.0, 0.0, 0.1], [0.9, 0.0, 0.1], [1.0, 0.1, 0.0])
    names = ["Search failure", "Search without a query", "Plan deviation"]
    types = [search, query, plan]
    centroids = np.stack([t.mean(axis=0) for t in types])

    def joins(central, names, free, cents=None):  # noqa: ANN001, ANN202
        cents = np.stack([t.mean(axis=0) for t in central]) if cents is None else cents
        return indistinct_joins(central, cents, names, free, fake_encode)

    # 4 of the second type's 5 statements sit nearer "Search failure" than its own name, and the two are closer
    # than "Search failure" and "Plan deviation", whose names tell their statements apart: one failure
    assert joins(types, names, [True, True, True]) == [(1, 0, 4)]
    # as near by name, but no nearer in content than two types known to differ: not shown to be one failure
    apart = centroids.copy()
    apart[1] = [0.0, -1.0, 0.2]  # cosine to "Search failure"'s centroid about -0.9, below the bar (search and
    # plan: about 0)
    assert joins(types, names, [True, True, True], apart) == []
    # two joins of four different types are made in one round, the one with more statements first
    near = members([1.0, 0.0, 0.05], [0.95, 0.1, 0.0], [1.0, 0.05, 0.0], [0.9, 0.0, 0.1], [1.0, 0.1, 0.1])
    assert joins([*types, near], [*names, "Search near plan"], [True] * 4) == [(3, 2, 5), (1, 0, 4)]
    # a fixed name (a seed's, a kind's) neither joins nor takes a type in
    assert joins(types, names, [False, True, True]) == []
    assert joins(types, names, [True, False, True]) == []
    # statements that pick their own name stay; so do statements spread over several names (no one type to join)
    assert joins([search, plan], ["Search failure", "Plan deviation"], [True, True]) == []
    spread = members([0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0])
    assert joins([search, spread, plan], ["Search failure", "Wrong answer format", "Plan deviation"],
                 [True, True, True]) == []
    # fewer than two types that their names tell apart: nothing to measure "different" by, nothing joins
    assert joins([search, query], ["Search failure", "Search without a query"], [True, True]) == []


class FakeOffline:
    """A fake labeller offering fixed candidates (the real one's `candidates` are tested above)."""

    def candidates(self, ev: TypeEvidence) -> list[str]:
        return {"other/T01": ["Answer format", "Wrong answer format"],
                "other/T02": ["Plan deviation", "Search failure"]}[ev.key]

    def label_as(self, ev: TypeEvidence, name: str) -> TypeLabel:
        return TypeLabel(name=name, definition=f"{name} (relabelled)", inclusion_criteria=[], examples=[],
                         naming_method="offline")


def test_only_types_still_named_by_the_labeller_change_names():
    from types import SimpleNamespace

    fmt = members([0.6, 0.0, 0.8], [0.55, 0.1, 0.8], [0.6, 0.0, 0.7], [0.5, 0.0, 0.9], [0.58, 0.0, 0.8])
    plan = members([0.9, 0.1, 0.4], [0.8, 0.0, 0.5], [0.9, 0.2, 0.3], [1.0, 0.0, 0.2], [0.85, 0.1, 0.4])
    vectors = {"f": fmt, "p": plan}
    drafts = [SimpleNamespace(seed_category=None, insight_ids=["f"]), SimpleNamespace(seed_category=None,
                                                                                     insight_ids=["p"])]
    evidence = [TypeEvidence(key=f"other/T0{k}", phase="other", insight_ids=[], texts=[], similarities=np.zeros(0),
                             keywords=[]) for k in (1, 2)]
    labels = [TypeLabel(name=n, definition="-", inclusion_criteria=[], examples=[], naming_method="offline")
              for n in ("Answer format", "Plan deviation")]

    def vector_of(ids: list[str]) -> np.ndarray:
        return vectors[ids[0]]

    out, notes = distinct_labels(drafts, evidence, labels, ["Answer format", "Plan deviation"], FakeOffline(),
                                 vector_of, fake_encode)
    assert [lab.name for lab in out] == ["Wrong answer format", "Plan deviation"]
    assert notes == [{"type": "other/T01", "labelled": "Answer format", "chosen": "Wrong answer format", "of": 2,
                      "central_nearest_own": [5, 5], "phase_central_nearest_own": [7, 10]}]
    # named by its kind (the labeller's own name was another) or by a seed: kept
    kept, _ = distinct_labels(drafts, evidence, labels, ["Unexpected output", "Plan deviation"], FakeOffline(),
                              vector_of, fake_encode)
    assert [lab.name for lab in kept] == ["Answer format", "Plan deviation"]
    seeded = [SimpleNamespace(seed_category=object(), insight_ids=["f"]), drafts[1]]
    kept, _ = distinct_labels(seeded, evidence, labels, ["Answer format", "Plan deviation"], FakeOffline(),
                              vector_of, fake_encode)
    assert [lab.name for lab in kept] == ["Answer format", "Plan deviation"]
    unchanged, notes = distinct_labels(drafts, evidence, labels, ["Answer format", "Plan deviation"], FakeOffline(),
                                       vector_of, None)  # no model: as labelled
    assert unchanged == labels and notes == []


def test_another_name_is_one_whole_phrase():
    texts = ["The agent deviated from the initial plan and chose to answer directly",
             "It deviated from the initial plan and chose to guess the answer",
             "The tool failure as a file not found issue was misread as a failed plan",
             "Misread the tool failure as a file not found error"]
    found = condensed_candidates(texts)
    assert "Deviated from the initial plan" in found
    for name in found:  # not two parts joined, nor cut before its statement goes on ("... as a file" + "not found")
        assert "and" not in name.lower().split() and not name.lower().endswith("as a file"), name

"""Edits that survive: rename, merge and split a failure type, then rebuild with other parameters; the edits
follow the insights, and an edit whose type is gone is reported, not guessed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.core.errors import ConfigError, NotFoundError
from failatlas.taxonomy import load_taxonomy
from failatlas.taxonomy import run as build
from failatlas.taxonomy.edits import edit_taxonomy, load_edits
from tests.taxonomy.conftest import TRAIL_PARAMS


def _members(store, taxonomy_id):
    out = {}
    for insight, type_id in store.query(
        "SELECT insight_id, failure_type_id FROM insight_failure_types WHERE taxonomy_id = ?", [taxonomy_id]
    ):
        out.setdefault(type_id, set()).add(insight)
    return out


def test_rename_merge_split_change_the_snapshot_and_survive_a_rebuild(trail_store):
    first = build(trail_store, TRAIL_PARAMS)
    a, b, c, d = (t.id for t in first.types[:4])
    before = _members(trail_store, first.id)
    n_before = trail_store.query("SELECT count(*) FROM insight_failure_types WHERE taxonomy_id = ?", [first.id])

    edit_taxonomy(trail_store, "rename", [a], {"name": "Plan ends without its end tag", "definition": "Mine."})
    edit_taxonomy(trail_store, "merge", [b, c], {"name": "Tool misuse, merged by hand"})
    split_edit, _ = edit_taxonomy(trail_store, "split", [d], {"k": 2})
    edited = load_taxonomy(trail_store, first.id)
    by_id = {t.id: t for t in edited.types}
    assert by_id[a].name == "Plan ends without its end tag" and by_id[a].definition == "Mine."
    assert by_id[a].naming_method == "edited"
    assert c not in by_id and by_id[b].name == "Tool misuse, merged by hand"
    after = _members(trail_store, first.id)
    assert after[b] == before[b] | before[c]
    assert by_id[b].n_insights == first.types[1].n_insights + first.types[2].n_insights
    parts = [t for t in edited.types if t.id == d or (t.naming_method == "edited" and t.id not in (a, b))]
    assert len(parts) == 2 and set().union(*(after[t.id] for t in parts)) == before[d]
    assert trail_store.query("SELECT count(*) FROM insight_failure_types WHERE taxonomy_id = ?", [first.id]) \
        == n_before  # no insight lost or doubled
    assert [e.action for e in load_edits(trail_store)] == ["rename", "merge", "split"] and split_edit.id == 3

    # a rebuild with other parameters (a new snapshot): the edits are applied to the types holding the insights
    second = build(trail_store, TRAIL_PARAMS.model_copy(update={"max_categories": 3}))
    assert second.id != first.id
    assert len(second.edit_notes) == 3 and all("applied" in n for n in second.edit_notes), second.edit_notes
    names = {t.name for t in second.types}
    assert {"Plan ends without its end tag", "Tool misuse, merged by hand"} <= names
    renamed = next(t for t in second.types if t.name == "Plan ends without its end tag")
    assert len(_members(trail_store, second.id)[renamed.id] & before[a]) >= 0.5 * len(before[a])
    stored = trail_store.query("SELECT name FROM failure_types WHERE taxonomy_id = ?", [second.id])
    assert ("Tool misuse, merged by hand",) in stored


def test_an_edit_whose_type_disappeared_is_reported(trail_store):
    first = build(trail_store, TRAIL_PARAMS)
    target = first.types[0]
    edit_taxonomy(trail_store, "rename", [target.id], {"name": "Gone soon"})
    # the next clustering scatters that type's insights: no new type holds half of them
    with trail_store.write() as conn:
        conn.execute(
            "UPDATE cluster_assignments SET cluster = -1 WHERE insight_id IN (SELECT insight_id FROM"
            " insight_failure_types WHERE taxonomy_id = ? AND failure_type_id = ?)",
            [first.id, target.id],
        )
    second = build(trail_store, TRAIL_PARAMS.model_copy(update={"assign_threshold": 0.99}))
    assert any("disappeared" in n for n in second.edit_notes)
    assert "Gone soon" not in {t.name for t in second.types}
    run = trail_store.query(
        "SELECT summary FROM stage_runs WHERE stage = 'taxonomy.build' ORDER BY started_at DESC LIMIT 1"
    )[0][0]
    assert "disappeared" in json.dumps(run)


def test_bad_edits_are_refused_and_nothing_is_stored(trail_store):
    tax = build(trail_store, TRAIL_PARAMS)
    with pytest.raises(NotFoundError):
        edit_taxonomy(trail_store, "rename", ["execution/T99"], {"name": "x"})
    with pytest.raises(ConfigError):
        edit_taxonomy(trail_store, "rename", [tax.types[0].id], {"name": "  "})
    with pytest.raises(ConfigError):
        edit_taxonomy(trail_store, "merge", [tax.types[0].id], {})
    with pytest.raises(ConfigError):
        edit_taxonomy(trail_store, "merge", [tax.types[0].id, tax.types[0].id], {})
    with pytest.raises(ConfigError):
        edit_taxonomy(trail_store, "split", [tax.types[0].id], {"k": 1})
    with pytest.raises(ConfigError):
        edit_taxonomy(trail_store, "recolour", [tax.types[0].id], {})
    assert load_edits(trail_store) == []


def test_cli_rename_and_merge(trail_store):
    tax = build(trail_store, TRAIL_PARAMS)
    db = str(trail_store.path)
    runner = CliRunner()
    renamed = runner.invoke(app, ["--db", db, "taxonomy", "rename", tax.types[0].id, "Readable name"])
    assert renamed.exit_code == 0, renamed.output
    assert "Readable name" in renamed.output and "saved as edit 1" in renamed.output
    merged = runner.invoke(app, ["--db", db, "taxonomy", "merge", tax.types[1].id, tax.types[2].id])
    assert merged.exit_code == 0, merged.output
    shown = runner.invoke(app, ["--db", db, "taxonomy", "show"], env={"COLUMNS": "200"})
    assert "Readable name" in shown.output


def test_a_split_never_gives_two_types_one_name():
    """Issue 42: a split whose parts say the same thing (here every insight reads alike) named both parts "Off its
    expected value"; each part, and every other type of the taxonomy, keeps a name of its own."""
    import numpy as np

    from failatlas.taxonomy.edits import Edit, apply_edits
    from failatlas.taxonomy.model import FailureType

    def kind(type_id: str, name: str) -> FailureType:
        return FailureType(id=type_id, phase="execution", category_id="C1", name=name, definition="", examples=[],
                           inclusion_criteria=[], keywords=[], centroid=[1.0, 0.0], n_insights=4, merged_from=[],
                           naming_method="offline")

    types = [kind("execution/T01", "Results off the reference"), kind("execution/T02", "Off its expected value")]
    records = [("execution/T01", f"i{n}", 0.9, "cluster") for n in range(4)]
    text = "the metric accuracy is off its expected value"

    def content(ids: list[str]) -> tuple[list[str], np.ndarray]:
        vectors = np.array([[1.0, 0.0] if int(i[1:]) % 2 else [0.0, 1.0] for i in ids])
        return [text] * len(ids), vectors

    edit = Edit(action="split", phase="execution", anchors=[["i0", "i1", "i2", "i3"]], args={"k": 2}, made_on="t")
    edited, _, notes = apply_edits([edit], types, records, content)
    names = [t.name.lower() for t in edited]
    assert "applied" in notes[0] and len(edited) == 3
    assert len(set(names)) == len(names), names

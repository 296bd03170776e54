"""Labels a person gave without a seed name only the categories they name: on TRAIL GAIA (502 distinct
statements, 19 human categories), 5 labels in 3 categories made `taxonomy build` put every statement into those 3
and find no new type (found through the app's label action, issue 31). A statement joins a learned category only
when it is as near that category's labelled statements as a seed's prototype match must be; the rest is
clustered into new types. Real data, real MiniLM, the real CLI."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from failatlas.store import open_store
from tests.taxonomy.test_user_labels_gaia import cli

pytestmark = pytest.mark.slow


def test_a_few_labels_without_a_seed_leave_the_rest_to_clustering(gaia_cli_store: Path, tmp_path: Path):
    db = Path(shutil.copy(gaia_cli_store, tmp_path / "gaia.duckdb"))
    store = open_store(db)
    by_label: dict[str, list[str]] = {}
    for iid, label in store.query("SELECT DISTINCT insight_id, label FROM insight_sources ORDER BY insight_id"):
        by_label.setdefault(label, []).append(iid)
    given = {"Formatting Errors": by_label["Formatting Errors"][:1],
             "Instruction Non-compliance": by_label["Instruction Non-compliance"][:2],
             "Goal Deviation": by_label["Goal Deviation"][:2]}
    for label, ids in given.items():
        cli(db, "label", "add", *ids, "--as", label)
    cli(db, "taxonomy", "build")
    [(tx,)] = store.query("SELECT id FROM taxonomies ORDER BY created_at DESC LIMIT 1")
    rows = store.query("SELECT ift.insight_id, ft.name, ft.origin FROM insight_failure_types ift JOIN failure_types"
                       " ft ON ft.id = ift.failure_type_id AND ft.taxonomy_id = ift.taxonomy_id"
                       " WHERE ift.taxonomy_id = ?", [tx])
    learned = {iid: name for iid, name, origin in rows if origin == "seed"}
    new_types = {name for _, name, origin in rows if origin != "seed"}
    assert all(learned.get(i) == label for label, ids in given.items() for i in ids)  # a person's label holds
    # the three named categories hold 252 of the 502 statements in truth; measured 267 joined them (was 502)
    assert len(learned) <= 0.6 * len(rows), Counter(learned.values())
    assert len(new_types) >= 5, new_types  # measured 12 (was 0)

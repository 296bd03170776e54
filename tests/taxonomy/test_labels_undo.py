"""Labels that undo and stay in place (issue 53): removing the labels and building again makes the first build
current again everywhere "the newest" is opened by default (`taxonomy show`, the app, `taxonomy export`); two
labels move only statements nearer their examples than to any other category by the calibrated margin, and the
build says which ones moved."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from failatlas.store import Store, open_store
from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labels import label_insights, remove_labels
from failatlas.taxonomy.margin import calibrated_margin, label_prototypes, margins
from failatlas.taxonomy.read import list_taxonomies, load_taxonomy
from tests.taxonomy.fill import lsa_vectors
from tests.taxonomy.test_label_scope import ATTRIBUTE_ERROR, INDEX_ERROR, ROWS, _assignment, _demo_like

ROOT = Path(__file__).resolve().parents[2]
# a crash of another file and cause: neither label's failure, and it must stay where it was
FAR_CRASH = "ZeroDivisionError: division by zero in `tree.py::information_gain` when a split is empty"


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FAILATLAS_NO_PROGRESS="1", COLUMNS="200",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("FAILATLAS_DB", None)
    return subprocess.run([sys.executable, "-m", "failatlas", "--db", str(db), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def labelled_db(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A demo-shaped store on a file, with a crash in another file added to the crash cluster."""
    ROWS["implementation"].append((FAR_CRASH, "crash", "tree.py::information_gain", 1))
    try:
        path = tmp_path / "undo.duckdb"
        ids = _demo_like(open_store(path))
    finally:
        ROWS["implementation"].pop()
    return path, ids


def test_removing_the_labels_and_rebuilding_makes_the_first_build_current_in_cli_app_and_export(
        labelled_db: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path, ids = labelled_db
    store = open_store(path)
    first = build(store, BuildParams())
    label_insights(store, [ids[INDEX_ERROR]], "Index out of range")
    label_insights(store, [ids[ATTRIBUTE_ERROR]], "Attribute never set")
    learned = build(store, BuildParams())
    assert learned.id != first.id and load_taxonomy(store).id == learned.id
    assert remove_labels(store, label="Index out of range") == 1
    assert remove_labels(store, label="Attribute never set") == 1

    built = _cli(path, "taxonomy", "build")
    assert built.returncode == 0, built.stderr
    assert first.id in built.stdout and "current" in built.stdout
    store = Store(path)
    listed = list_taxonomies(store)
    assert listed["id"][0] == first.id and listed["current"].to_list() == [True, False]
    assert load_taxonomy(store).id == first.id
    shown = _cli(path, "taxonomy", "show")
    assert shown.returncode == 0, shown.stderr
    assert f"({first.id})" in shown.stdout and learned.id not in shown.stdout
    out = tmp_path / "export"
    exported = _cli(path, "taxonomy", "export", "--out", str(out), "--formats", "md")
    assert exported.returncode == 0, exported.stderr
    table = (out / "prevalence.md").read_text()
    assert f"taxonomy v{first.version})" in table and f"taxonomy v{learned.version})" not in table

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("FAILATLAS_DB", str(path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(page="taxonomy")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    [picker] = [s for s in at.sidebar.selectbox if s.label == "Taxonomy"]
    assert picker.value == first.id and "(current)" in picker.format_func(first.id)

    again = _cli(path, "taxonomy", "build", "--label-threshold", "0.3")  # another build: it is current now
    assert again.returncode == 0, again.stderr
    assert load_taxonomy(Store(path)).id not in (first.id, learned.id)


def test_two_labels_move_only_statements_within_the_margin_and_the_build_says_which(
        labelled_db: tuple[Path, dict[str, str]]):
    path, ids = labelled_db
    store = open_store(path)
    first = _assignment(store, build(store, BuildParams()).id)
    label_insights(store, [ids[INDEX_ERROR]], "Index out of range")
    label_insights(store, [ids[ATTRIBUTE_ERROR]], "Attribute never set")
    learned = build(store, BuildParams())
    second = _assignment(store, learned.id)
    effects = {e.label: e for e in learned.label_effects if e.kind == "crash"}
    assert set(effects) == {"Index out of range", "Attribute never set"}
    margin = effects["Index out of range"].margin
    assert margin is not None and margin > 0
    spread = {i for e in effects.values() for i in e.spread_to}
    # what moved is exactly what the build says spread, and each of them cleared the margin
    moved = {i for i, row in second.items() if row[2] in effects and first[i][2] != row[2]}
    assert moved - {ids[INDEX_ERROR], ids[ATTRIBUTE_ERROR]} == spread
    assert second[ids[FAR_CRASH]][2] not in effects  # the crash in another file stays out of both
    assert second[ids[FAR_CRASH]][3] != second[ids[INDEX_ERROR]][3]
    texts = [t for items in ROWS.values() for t, *_ in items]
    texts.insert(len(ROWS["implementation"]), FAR_CRASH)  # where the fixture appended it
    vectors = dict(zip(texts, lsa_vectors(texts, dim=16), strict=True))
    text_of = {i: t for t, i in ids.items()}
    protos = label_prototypes(np.array([vectors[INDEX_ERROR], vectors[ATTRIBUTE_ERROR]]),
                              ["Index out of range", "Attribute never set"], ["Index out of range",
                                                                              "Attribute never set"])
    for iid in spread:  # without the types as contrast a gap can only be larger
        best = 0 if second[iid][2] == "Index out of range" else 1
        assert margins(np.array([vectors[text_of[iid]]]), protos, np.array([best]), np.zeros((0, 16)))[0] >= margin
    described = effects["Index out of range"].describe()
    assert f"by at least {margin:.3f}" in described


def test_the_margin_is_the_median_gap_between_a_statements_two_nearest_categories():
    categories = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    statements = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.6, 0.8, 0.0]])
    assert calibrated_margin(statements, categories) == pytest.approx(0.2)  # gaps 1.0, 0.2, 0.2
    assert calibrated_margin(statements, categories[:1]) == 0.0  # nothing to choose between
    gap = margins(np.array([[0.8, 0.6, 0.0]]), categories, np.array([0]), np.zeros((0, 3)))
    assert gap[0] == pytest.approx(0.2)
    assert margins(np.array([[0.8, 0.6, 0.0]]), categories, np.array([0]), np.array([[0.7, 0.7, 0.0]]))[0] < 0

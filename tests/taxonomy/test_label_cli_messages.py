"""`failatlas label` as a user meets it, in a process of its own on a real DuckDB file: a label file's rows that
match no statement of the store (refused by line, skipped, or kept and said), `remove --label` of a name no label
has, `list` with the insight each label is on, what `add` says it did, and ids given by a unique prefix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from failatlas.core.errors import InputError
from failatlas.store import Store, open_store
from failatlas.taxonomy.labels import label_file, list_labels
from tests.taxonomy.fill import add_insights, insight_id

ROOT = Path(__file__).resolve().parents[2]
STATEMENTS = [
    ("implementation", "The agent never set a random seed."),
    ("implementation", "The agent forgot to install torch."),
    ("execution", "The agent forgot to install torch."),  # the same statement in two phases: two insights
    ("execution", "The run timed out after an hour while the agent waited on a download that never finished."),
    ("conclusion", "The agent reported an accuracy it never measured."),
    ("design", "The agent chose a baseline the paper did not use."),
]


def cli(db: Path, *args: str, columns: int = 200) -> subprocess.CompletedProcess:
    env = dict(os.environ, FAILATLAS_NO_PROGRESS="1", COLUMNS=str(columns),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("FAILATLAS_DB", None)
    return subprocess.run([sys.executable, "-m", "failatlas", "--db", str(db), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "labels.duckdb"
    store = open_store(path)
    add_insights(store, [{"phase": p, "text": t} for p, t in STATEMENTS])
    return path


def write_labels(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in rows))
    return path


def test_rows_matching_no_statement_are_refused_by_line_skipped_or_kept_and_said(db: Path, tmp_path: Path):
    typos = [(f"The agnet typo number {k}.", "Typo") for k in range(7)]
    rows = [(STATEMENTS[0][1], "Reproducibility"), *typos, (STATEMENTS[1][1], "Missing package")]
    path = write_labels(tmp_path / "labels.jsonl", rows)

    refused = cli(db, "label", "add", "--labels", str(path))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    error = refused.stderr.strip()
    assert "\n" not in error and error.startswith("error: ")
    assert f"{path}: 7 of 9 rows match no statement in this store (lines 2, 3, 4, 5, 6 and 2 more)" in error
    assert "nothing was written" in error and "--unmatched keep" in error
    assert list_labels(Store(db)) == []  # all or nothing

    skipped = cli(db, "label", "add", "--labels", str(path), "--unmatched", "skip")
    assert skipped.returncode == 0, skipped.stderr
    out = " ".join(skipped.stdout.split())
    assert "skipped 7 row(s) of labels.jsonl that match no statement in this store: line(s) 2, 3, 4, 5, 6 and 2 more" \
        in out
    assert "labelled 2 distinct statement(s); the store now holds 2 labelled statements" in out
    assert {r.label for r in list_labels(Store(db))} == {"Reproducibility", "Missing package"}

    kept = cli(db, "label", "add", "--labels", str(path), "--unmatched", "keep")
    assert kept.returncode == 0, kept.stderr
    out = " ".join(kept.stdout.split())
    assert "kept 7 row(s) of labels.jsonl that match no statement in this store" in out
    assert "`taxonomy build`, `embed tune` and `taxonomy show --quality` use them" in out
    assert "labelled 9 distinct statement(s); the store now holds 9 labelled statements" in out
    stored = {r.text: r.insight_ids for r in list_labels(Store(db))}
    assert all(stored[t] == () for t, _ in typos)
    assert stored[STATEMENTS[1][1]] == tuple(sorted(insight_id(p, STATEMENTS[1][1]) for p in ("implementation",
                                                                                              "execution")))
    listed = " ".join(cli(db, "label", "list").stdout.split())
    assert "9 labelled distinct statement(s); 7 not in this store" in listed
    assert listed.count("not in this store") == 8  # the title and each of the 7 rows


def test_a_file_whose_rows_all_miss_is_refused_even_when_skipping(db: Path, tmp_path: Path):
    store = open_store(db)
    path = write_labels(tmp_path / "labels.jsonl", [("No such statement.", "X")])
    with pytest.raises(InputError, match=r"labels.jsonl: 1 of 1 rows match no statement in this store \(line 1\)"):
        label_file(store, path)
    with pytest.raises(InputError, match="no row matches a statement in this store; nothing was written"):
        label_file(store, path, unmatched="skip")
    assert list_labels(store) == []
    done = label_file(store, path, unmatched="keep")
    assert done.n_labelled == 1 and done.unmatched_lines == ((1, "No such statement."),)


def test_remove_of_a_label_name_no_label_has_fails_and_names_the_labels(db: Path):
    assert cli(db, "label", "add", insight_id(*STATEMENTS[0]), "--as", "Reproducibility").returncode == 0
    assert cli(db, "label", "add", insight_id(*STATEMENTS[3]), "--as", "Timeout").returncode == 0
    missed = cli(db, "label", "remove", "--label", "Nope")
    assert missed.returncode == 3, missed.stdout + missed.stderr
    error = missed.stderr.strip()
    assert "\n" not in error and "removed" not in missed.stdout
    assert "no label is named 'Nope'; the store's labels: 'Reproducibility', 'Timeout'" in error
    near = cli(db, "label", "remove", "--label", "timeout").stderr
    assert "the store's labels: 'Timeout', 'Reproducibility'" in near  # the nearest spelling first
    assert len(list_labels(Store(db))) == 2  # nothing removed
    gone = cli(db, "label", "remove", "--label", "Timeout")
    assert gone.returncode == 0 and "removed 1 label(s)" in gone.stdout


@pytest.mark.parametrize("columns", [72, 120])
def test_list_shows_each_labels_insight_id_whole_and_cuts_the_text_at_the_width(db: Path, tmp_path: Path,
                                                                               columns: int):
    long_phase, long_text = STATEMENTS[3]
    assert cli(db, "label", "add", insight_id(long_phase, long_text), "--as", "Timeout").returncode == 0
    torch = STATEMENTS[1][1]
    path = write_labels(tmp_path / "labels.jsonl", [(torch, "Missing package"), ("Not ingested yet.", "Later")])
    assert cli(db, "label", "add", "--labels", str(path), "--unmatched", "keep").returncode == 0

    listed = cli(db, "label", "list", columns=columns)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), listed.stdout
    row = {label: next(line for line in lines if line.startswith(label))
           for label in ("Timeout", "Missing package", "Later")}
    assert insight_id(long_phase, long_text) in row["Timeout"]
    first = min(insight_id(p, torch) for p in ("implementation", "execution"))
    assert f"{first} +1" in row["Missing package"]  # the statement is two insights of this store
    assert "not in this store" in row["Later"] and "Not ingested yet." in row["Later"]
    assert long_text not in row["Timeout"] and row["Timeout"].split("…")[0].split()[-1] in long_text  # cut, marked
    assert "…" in row["Timeout"] and "file labels.jsonl" in row["Later"]


def test_add_says_the_stores_total_takes_a_unique_id_prefix_and_help_says_where_ids_are(db: Path):
    seed = insight_id(*STATEMENTS[0])
    added = cli(db, "label", "add", seed[:8], "--as", "Reproducibility")
    assert added.returncode == 0, added.stderr
    assert ("labelled 1 distinct statement(s); the store now holds 1 labelled statements"
            in " ".join(added.stdout.split()))
    assert [(r.text, r.insight_ids) for r in list_labels(Store(db))] == [(STATEMENTS[0][1],
                                                                                                (seed,))]
    short = cli(db, "label", "add", seed[:3], "--as", "X")
    assert short.returncode == 3 and f"no insight '{seed[:3]}'" in short.stderr  # too short to be a prefix
    helped = " ".join(cli(db, "label", "add", "--help").stdout.split())
    for where in ("failatlas label list", "failatlas taxonomy show --definitions", "drill-down", "unique prefixes"):
        assert where in helped, where
    assert "--unmatched" in helped and "refuse" in helped


def test_an_id_prefix_naming_several_insights_is_refused_and_names_them(db: Path):
    with open_store(db).write() as conn:  # two insights whose ids share their first 6 characters
        conn.executemany("INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, 'other', ?, 1)",
                         [("abcdef0000000001", "First twin."), ("abcdef0000000002", "Second twin.")])
    ambiguous = cli(db, "label", "add", "abcdef", "--as", "Twin")
    assert ambiguous.returncode == 2, ambiguous.stdout + ambiguous.stderr
    assert ("insight id prefix 'abcdef' names several insights (abcdef0000000001, abcdef0000000002)"
            in ambiguous.stderr)
    assert list_labels(Store(db)) == []
    assert cli(db, "label", "add", "abcdef0000000002", "--as", "Twin").returncode == 0  # a whole id is exact
    assert cli(db, "label", "remove", "abcdef00000000").returncode == 2
    assert cli(db, "label", "remove", "abcdef0000000002").returncode == 0
    assert list_labels(Store(db)) == []


@pytest.mark.slow  # cross-validates the label model on TRAIL: out of the README's quick command
def test_quality_says_how_many_cross_validated_labels_are_not_in_the_store(shared_data: Path, tmp_path: Path):
    """A kept label on a statement no insight has is cross-validated like the others, and `taxonomy show
    --quality` says how many of them there are (a store embedded by real MiniLM, clustered by k-means)."""
    from sklearn.cluster import KMeans

    from failatlas.embed import DEFAULT_MODEL, EmbedParams, find_embedding_set, load_insight_vectors
    from failatlas.embed import run as embed
    from failatlas.ingest import FileIngestParams, run_file
    from tests.taxonomy.fill import add_clustering

    source = tmp_path / "trail_first80.jsonl"
    source.write_text("".join((shared_data / "trail" / "trail_errors_gaia.jsonl").read_text().splitlines(True)[:80]))
    db = tmp_path / "quality.duckdb"
    store = open_store(db)
    run_file(store, FileIngestParams(paths=[source]))
    embed(store, EmbedParams(model=DEFAULT_MODEL, normalise="none", device="cpu"))
    data = load_insight_vectors(store, find_embedding_set(store, model=DEFAULT_MODEL, normalise="none"))
    add_clustering(store, "cl-first80", "other", data.ids, KMeans(4, n_init=3, random_state=0).fit_predict(
        data.vectors), model=DEFAULT_MODEL, embedding_set_id=data.embedding_set.id)
    rows = store.query("SELECT i.text, min(s.label) FROM insights i JOIN insight_sources s ON s.insight_id = i.id"
                       " GROUP BY i.text ORDER BY i.text LIMIT 10")
    orphan = ("The agent answered in French although the task asked for English.", rows[0][1])
    path = write_labels(tmp_path / "labels.jsonl", [*rows, orphan])
    kept = cli(db, "label", "add", "--labels", str(path), "--unmatched", "keep")
    assert kept.returncode == 0 and "kept 1 row(s)" in kept.stdout, kept.stdout + kept.stderr
    built = cli(db, "taxonomy", "build", "-c", "cl-first80", "--seed", "trail")
    assert built.returncode == 0, built.stdout + built.stderr[-3000:]
    shown = cli(db, "taxonomy", "show", "--quality", columns=300)
    assert shown.returncode == 0, shown.stderr
    out = " ".join(shown.stdout.split())
    assert "5-fold over 11 labelled distinct statements, 1 of them not in this store (`failatlas label list`)" in out

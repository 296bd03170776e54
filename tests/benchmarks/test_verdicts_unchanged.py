"""benchmarks/verdicts_unchanged.py's comparison (issue 51): what it dumps from a real store, what it calls a
difference, and how an older checkout is handed a store that newer code saved tasks into. No runs are made."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import verdicts_unchanged  # noqa: E402

from failatlas.bench_core.suites import load_suite  # noqa: E402
from failatlas.bench_core.tasks import save_tasks  # noqa: E402
from failatlas.store import open_store  # noqa: E402


def _write(root: Path, label: str, kind_rows: dict[str, dict]) -> None:
    for kind in verdicts_unchanged.STORES:
        (root / kind).mkdir(parents=True, exist_ok=True)
        (root / kind / f"{label}.json").write_text(json.dumps(kind_rows.get(kind, {})))


def test_diff_counts_each_changed_verdict_and_nothing_else(tmp_path, capsys):
    run = {"E": {"outcome": "passed", "exit": 0, "observed": {"acc": 0.9}},
           "judgements": {"implementation/hidden-tests": ["ok", True, 1.0]}, "findings": ["r:warning"]}
    changed = json.loads(json.dumps(run))
    changed["judgements"]["implementation/hidden-tests"] = ["ok", False, 0.0]
    changed["findings"] = []
    _write(tmp_path, "before", {"proof": {"gold on t": run, "null on t": run}})
    _write(tmp_path, "same", {"proof": {"gold on t": run, "null on t": run}})
    _write(tmp_path, "after", {"proof": {"gold on t": run, "null on t": changed}})
    assert verdicts_unchanged.diff(tmp_path, "before", "same") == 0
    capsys.readouterr()
    assert verdicts_unchanged.diff(tmp_path, "before", "after") == 1
    out = capsys.readouterr().out
    assert "proof: 2 runs, 1 differ" in out and "in all: 1 of 2 runs differ" in out
    assert 'implementation/hidden-tests: ["ok", true, 1.0] -> ["ok", false, 0.0]' in out
    assert "finding only before: r:warning" in out
    assert "gold on t" not in out


def test_a_run_missing_on_one_side_differs(tmp_path, capsys):
    _write(tmp_path, "before", {"attacks": {"null on t": {"E": {"outcome": "failed"}}}})
    _write(tmp_path, "after", {})
    assert verdicts_unchanged.diff(tmp_path, "before", "after") == 1
    assert "E outcome: \"failed\" -> null" in capsys.readouterr().out


def test_fields_unknown_to_the_code_are_dropped_from_a_copy_and_named(tmp_path, capsys):
    store = open_store(tmp_path / "runs.duckdb")
    task = load_suite("failatlas-mini")[0]
    save_tasks(store, [task], source="failatlas-mini")
    with store.write() as con:  # what a newer checkout's task carries that this code does not know
        spec = json.loads(con.execute("SELECT spec FROM tasks").fetchone()[0])
        spec["a_later_field"] = [1]
        con.execute("UPDATE tasks SET spec = ?", [json.dumps(spec)])
    verdicts_unchanged._fit_tasks(store, "proof", "before")
    assert "dropped from the stored tasks: a_later_field" in capsys.readouterr().out
    kept = json.loads(store.query("SELECT spec FROM tasks")[0][0])
    assert "a_later_field" not in kept and kept == {k: v for k, v in spec.items() if k != "a_later_field"}
    verdicts_unchanged._fit_tasks(store, "proof", "before")  # nothing left to drop: says nothing
    assert capsys.readouterr().out == ""


def test_columns_unknown_to_the_code_are_dropped_from_a_copy_and_named(tmp_path, capsys):
    store = open_store(tmp_path / "runs.duckdb")
    with store.write() as con:  # what a newer checkout's migration added
        con.execute("ALTER TABLE judgements ADD COLUMN later_ids JSON")
    verdicts_unchanged._fit_tables(store, "proof", "before")
    assert "columns this code does not have, dropped: judgements.later_ids" in capsys.readouterr().out
    columns = {c for (c,) in store.query("SELECT column_name FROM information_schema.columns"
                                         " WHERE table_name = 'judgements'")}
    assert "later_ids" not in columns and {"run_id", "phase", "judge", "status"} <= columns
    verdicts_unchanged._fit_tables(store, "proof", "before")
    assert capsys.readouterr().out == ""

"""The stage-run record every stage writes, and the registries extensions use."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from failatlas.core.errors import ConfigError
from failatlas.core.registry import Registry
from failatlas.core.stages import stage_run
from failatlas.core.version import code_version


class P(BaseModel):
    k: int = 3
    seed: int = 7


def _rows(store):
    return store.query_dicts("SELECT * FROM stage_runs ORDER BY started_at")


def test_a_finished_stage_run_records_params_seed_version_seconds_and_rows(store):
    with stage_run(store, "demo.stage", P(), seed=7) as run:
        with store.write() as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
            conn.execute("INSERT INTO t VALUES (1), (2)")
        run.count("t", 2)
        run.note(device="cpu")
    (row,) = _rows(store)
    assert row["id"] == run.id and row["stage"] == "demo.stage" and row["status"] == "ok"
    assert json.loads(row["params"]) == {"k": 3, "seed": 7} and row["seed"] == 7
    assert row["code_version"] == code_version() and code_version().startswith("failatlas ")
    assert json.loads(row["rows"]) == {"t": 2} and json.loads(row["summary"]) == {"device": "cpu"}
    assert row["seconds"] >= 0 and row["finished_at"] >= row["started_at"]


def test_a_failed_stage_run_is_recorded_and_its_writes_roll_back(store):
    with pytest.raises(ValueError, match="bad row"), stage_run(store, "demo.fail", {"a": 1}), store.write() as conn:
        conn.execute("CREATE TABLE u (x INTEGER)")
        raise ValueError("bad row 3")
    (row,) = _rows(store)
    assert row["status"] == "failed" and "bad row 3" in json.loads(row["summary"])["error"]
    assert "u" not in store.tables()


def test_an_interrupted_stage_run_says_so(store):
    with pytest.raises(KeyboardInterrupt), stage_run(store, "demo.stop"):
        raise KeyboardInterrupt
    assert _rows(store)[0]["status"] == "interrupted"


def test_a_stage_can_record_its_run_in_its_own_last_transaction(store):
    with stage_run(store, "demo.atomic", {}) as run, store.write() as conn:
        conn.execute("CREATE TABLE v (x INTEGER)")
        run.count("v", 0)
        run.record(conn)
    rows = _rows(store)
    assert len(rows) == 1 and rows[0]["status"] == "ok"


def test_registry_names_what_it_knows():
    things: Registry[object] = Registry("widget")

    @things.register("round")
    class Round:
        def __init__(self, radius: float = 1.0) -> None:
            self.radius = radius

    assert things.names() == ["round"] and "round" in things
    assert things.create("round", radius=2.0).radius == 2.0
    with pytest.raises(ConfigError, match="unknown widget 'square'") as unknown:
        things.create("square")
    assert "choose one of: round" in unknown.value.one_line()
    with pytest.raises(ConfigError, match="does not take these parameters"):
        things.create("round", sides=4)
    with pytest.raises(ValueError, match="registered twice"):
        things.register("round")(lambda: None)


def test_a_stage_cannot_start_inside_an_open_write(store):
    with pytest.raises(RuntimeError, match="inside an open store.write"), store.write(), \
            stage_run(store, "demo.nested"):
        pass
    assert _rows(store) == []


def test_a_committed_ok_record_survives_a_later_failure_and_failed_counts_are_not_rows(store):
    with pytest.raises(KeyboardInterrupt), stage_run(store, "demo.late") as run:
        with store.write() as conn:
            conn.execute("CREATE TABLE w (x INTEGER)")
            conn.execute("INSERT INTO w VALUES (1)")
            run.count("w", 1)
            run.record(conn)
        raise KeyboardInterrupt  # Ctrl-C after the data and its record committed
    (row,) = _rows(store)
    assert row["status"] == "ok" and json.loads(row["rows"]) == {"w": 1}

    with pytest.raises(ValueError), stage_run(store, "demo.rolled-back") as run, store.write() as conn:
        conn.execute("CREATE TABLE z (x INTEGER)")
        run.count("z", 5)
        raise ValueError("bad")
    failed = [r for r in _rows(store) if r["stage"] == "demo.rolled-back"][0]
    assert failed["status"] == "failed" and json.loads(failed["rows"]) == {}
    assert json.loads(failed["summary"])["rows_counted"] == {"z": 5}

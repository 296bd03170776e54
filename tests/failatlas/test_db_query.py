"""`failatlas db query "SQL"` (issue 54, item 5): the store queried without Python, read-only (a write, ATTACH, COPY
or a file outside the store is refused, and the store is left as it was), output as a table, CSV or JSON that hold
what DuckDB itself returns (CSV text cells made safe for a spreadsheet); bad SQL and a bad format end in one line
naming what was wrong."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from failatlas.core.errors import InputError
from failatlas.core.query import read_query
from failatlas.store import Store, open_store

TASKS_SQL = "SELECT id, benchmark, kind FROM tasks ORDER BY id"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("query") / "s.duckdb"
    proc = _cli(path, "tasks", "import-mini")
    assert proc.returncode == 0, proc.stderr
    return path


def _cli(db: Path, *args: str, columns: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns), "FAILATLAS_NO_PROGRESS": "1"}
    return subprocess.run([sys.executable, "-m", "failatlas", "--db", str(db), *args], capture_output=True,
                          text=True, env=env, timeout=300)


def _direct(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def _digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def test_csv_and_json_hold_what_duckdb_returns(db):
    expected = _direct(db, TASKS_SQL)
    assert len(expected) >= 5
    out = _cli(db, "db", "query", "--format", "csv", TASKS_SQL)
    assert out.returncode == 0, out.stderr
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert rows[0] == ["id", "benchmark", "kind"]
    assert [tuple(r) for r in rows[1:]] == [tuple("" if v is None else str(v) for v in row) for row in expected]
    out = _cli(db, "db", "query", "-f", "json", "SELECT id, spec->'resources' AS resources FROM tasks ORDER BY id")
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert [r["id"] for r in records] == [row[0] for row in expected]
    assert all(isinstance(r["resources"], dict) and "time_limit_s" in r["resources"] for r in records)  # JSON as JSON


def test_json_output_is_strict_json_where_values_are_not_finite(db):
    """NaN and infinity (an imported row can carry them) print as null: `NaN` is no JSON other readers take."""
    sql = ("SELECT 'nan'::DOUBLE AS a, 'inf'::DOUBLE AS b, 1.5::DOUBLE AS c, "
           "'{\"x\": [1, 2]}'::JSON AS j, ['-inf'::DOUBLE, 2.0] AS l")
    out = _cli(db, "db", "query", "-f", "json", sql)
    assert out.returncode == 0, out.stderr
    strict = json.loads(out.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the JSON output"))
    assert strict == [{"a": None, "b": None, "c": 1.5, "j": {"x": [1, 2]}, "l": [None, 2.0]}]


def test_text_an_agent_wrote_comes_out_inert_in_csv_and_exact_in_json(db):
    """A text cell from a run or an imported file: in CSV, as every CSV FailAtlas writes, a formula is made inert
    and controls (escape sequences, bidirectional overrides) are dropped, numbers stay numbers; in JSON the same
    characters are written as \\uNNNN escapes, so nothing acts on a terminal and the value read back is exact."""
    hostile = "'=HYPERLINK(1)' || chr(27) || '[31m' || chr(8238) || chr(155) || 'é'"
    out = _cli(db, "db", "query", "--format", "csv", f"SELECT {hostile} AS x, -0.5 AS n")
    assert out.returncode == 0, out.stderr
    assert list(csv.reader(io.StringIO(out.stdout))) == [["x", "n"], ["'=HYPERLINK(1)[31mé", "-0.5"]]
    out = _cli(db, "db", "query", "--format", "json", f"SELECT {hostile} AS x")
    assert out.returncode == 0, out.stderr
    assert not any(ch in out.stdout for ch in "\x1b\u202e\x9b") and "é" in out.stdout
    assert json.loads(out.stdout) == [{"x": "=HYPERLINK(1)\x1b[31m\u202e\x9bé"}]


def test_the_table_lists_every_row_and_says_how_many(db):
    expected = _direct(db, TASKS_SQL)
    out = _cli(db, "db", "query", TASKS_SQL)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:3] == ["id", "benchmark", "kind"]
    for task_id, benchmark, _ in expected:
        assert any(line.split()[:2] == [task_id, benchmark] for line in out.stdout.splitlines()), task_id
    assert f"{len(expected)} row(s)" in out.stdout
    out = _cli(db, "db", "query", "--max-rows", "2", TASKS_SQL)
    assert f"{len(expected)} row(s); the first 2 shown" in out.stdout
    assert sum(line.split()[:1] == [row[0]] for line in out.stdout.splitlines() for row in expected) == 2


@pytest.mark.parametrize(("sql", "named"), [
    ("DELETE FROM tasks", "DELETE"),
    ("INSERT INTO tasks (id) VALUES ('x')", "INSERT"),
    ("UPDATE tasks SET kind = 'x'", "UPDATE"),
    ("DROP TABLE tasks", "DROP"),
    ("CREATE TABLE t AS SELECT * FROM tasks", "CREATE"),
    ("ATTACH ':memory:' AS other", "ATTACH"),
    ("COPY tasks TO 'tasks.csv'", "COPY"),
    ("SET enable_external_access = true", "SET"),
    ("PRAGMA show_tables", "PRAGMA"),
    ("SELECT 1; DELETE FROM tasks", "2 statements given (SELECT, DELETE)"),
])
def test_a_write_is_refused_before_it_runs(db, sql, named):
    before = _digest(db)
    with pytest.raises(InputError, match=r"refused|statements given") as caught:
        read_query(Store(db), sql)
    assert named in str(caught.value)
    assert _digest(db) == before


def test_a_select_reaches_no_file_but_the_store(db, tmp_path):
    secret = tmp_path / "other.csv"
    secret.write_text("a\n1\n")
    for sql in (f"SELECT * FROM read_csv('{secret}')", f"SELECT * FROM glob('{tmp_path}/*')",
                f"SELECT * FROM '{secret}'"):
        with pytest.raises(InputError, match="store's tables only|does not exist"):
            read_query(Store(db), sql)


def test_the_connection_itself_cannot_write(tmp_path):
    """The second guard, past the statement check: a store opened by `read_query` is read-only even to a
    statement it would let through (a write hidden in a SELECT's side effect is not possible in DuckDB; here the
    connection is asked directly)."""
    store = open_store(tmp_path / "s.duckdb")
    read_query(store, "SELECT 1")
    with store.read() as conn, pytest.raises(duckdb.Error, match="read-only"):
        conn.execute("CREATE TABLE t (a INT)")


def test_bad_input_ends_in_one_line_naming_it(db):
    for args, words in [
        (["SELECT * FROM runz"], ["runz", "does not exist"]),
        (["SELEC id FROM tasks"], ["does not parse", "SELEC"]),
        (["SELECT nosuchcolumn FROM tasks"], ["nosuchcolumn"]),
        (["DELETE FROM tasks"], ["DELETE is refused", "read-only"]),
        (["--format", "xml", "SELECT 1"], ["--format 'xml'", "table, csv, json"]),
        ([""], ["no SQL statement"]),
    ]:
        out = _cli(db, "db", "query", *args)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), out.stderr
        assert all(w in lines[0] for w in words), (words, lines[0])

"""A person's own SQL over the store, read-only (`failatlas db query`): one SELECT (or EXPLAIN) statement, on a
read-only connection that can reach no file but the store. Three guards, each enough for a write: the statement's
type is checked before it runs, the connection cannot write the store, and file access (ATTACH, COPY, read_csv,
extensions) is switched off and locked for it. The result comes back as plain rows, written as CSV or JSON here
and as a table by the CLI."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import re
import uuid
from dataclasses import dataclass
from typing import Any

import duckdb

from failatlas.core.errors import InputError
from failatlas.core.store import Store
from failatlas.core.tables import BIDI_CONTROLS, csv_cell

# what a read-only query may be: a query (SELECT, WITH, FROM ..., VALUES, SHOW, DESCRIBE, SUMMARIZE) or its plan
ALLOWED = frozenset({"SELECT", "EXPLAIN"})


@dataclass(frozen=True)
class QueryResult:
    """The columns (name and DuckDB type) and rows of one query, in order."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _statement_types(sql: str) -> list[str]:
    with duckdb.connect() as parser:  # parsing needs no store: a parse error never waits on a lock
        try:
            return [str(s.type).rsplit(".", 1)[-1] for s in parser.extract_statements(sql)]
        except duckdb.Error as exc:
            raise InputError(f"the SQL does not parse: {_first_line(exc)}", field="SQL") from exc


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split("\n\n")[0].split())


def check_read_only(sql: str) -> None:
    """Raise InputError unless `sql` is exactly one statement of an `ALLOWED` type, naming what it is otherwise."""
    types = _statement_types(sql)
    if not types:
        raise InputError("no SQL statement given", field="SQL", hint='e.g. failatlas db query "SELECT * FROM runs"')
    if len(types) > 1:
        raise InputError(f"{len(types)} statements given ({', '.join(types)}); the query takes one", field="SQL")
    if types[0] not in ALLOWED:
        raise InputError(f"{types[0]} is refused: the store is queried read-only (one SELECT or EXPLAIN statement; "
                         "no write, ATTACH, COPY, SET, LOAD or PRAGMA)", field="SQL",
                         hint="list tables with SHOW TABLES; their columns are in docs/STORE.md")


def read_query(store: Store, sql: str) -> QueryResult:
    """Run one read-only statement (`check_read_only`) on the store. Raises InputError naming what went wrong: a
    refused statement, SQL that does not parse, an unknown table or column, or a file the query tried to reach."""
    check_read_only(sql)
    with store.read() as conn:
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")
        try:
            cursor = conn.execute(sql)
            rows = cursor.fetchall()
        except duckdb.PermissionException as exc:
            raise InputError("the query may read the store's tables only, no other file: " + _first_line(exc),
                             field="SQL") from exc
        except duckdb.Error as exc:
            raise InputError(f"the query failed: {_first_line(exc)}", field="SQL",
                             hint="list tables with SHOW TABLES; their columns are in docs/STORE.md") from exc
        columns = [d[0] for d in cursor.description or []]
        types = [str(d[1]) for d in cursor.description or []]
    return QueryResult(columns, types, rows)


def _plain(value: Any) -> Any:  # noqa: ANN401 - whatever DuckDB returns
    """A value as JSON holds it: dates and times in ISO 8601, decimals and UUIDs as text, bytes as hex."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value


def _finite(value: Any) -> Any:  # noqa: ANN401
    """`value` with each NaN or infinite float as None: JSON has no such number (`NaN` is no JSON a reader takes)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# what JSON leaves raw with ensure_ascii=False but a terminal or viewer acts on: DEL, the C1 controls (0x9b starts an
# escape sequence on some terminals), the line and paragraph separators and the bidirectional controls; written as
# \uNNNN escapes, which stand for the same characters, so the data read back is exact
_UNSAFE_IN_JSON = re.compile(rf"[\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}]")


def to_json(result: QueryResult) -> str:
    """A JSON array of one object per row, keyed by column; a column of DuckDB's JSON type as the JSON it holds;
    a NaN or infinite number as null (strict JSON)."""
    parsed = {c for c, t in zip(result.columns, result.types, strict=True) if t == "JSON"}
    rows = [{c: json.loads(v) if c in parsed and isinstance(v, str) else _plain(v) for c, v in r.items()}
            for r in result.records()]
    text = json.dumps(_finite(rows), ensure_ascii=False, indent=1, allow_nan=False)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def cell_text(value: Any) -> str:  # noqa: ANN401
    """A value as one CSV or table cell: '' for NULL, lists and structs as JSON, times as DuckDB prints them
    ('2026-12-02 06:09:15'), the rest as text."""
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(_plain(value), ensure_ascii=False)
    return str(value) if isinstance(value, dt.datetime | dt.date | dt.time) else str(_plain(value))


def to_csv(result: QueryResult) -> str:
    """RFC 4180 CSV with a header row, safe to open in a spreadsheet as every CSV FailAtlas writes
    (`tables.csv_cell`: no control characters but newline and tab, a formula made inert); numbers stay numbers."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in result.columns])
    writer.writerows([csv_cell(cell_text(v)) for v in row] for row in result.rows)
    return buf.getvalue()

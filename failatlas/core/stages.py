"""The stage contract and the record of every stage run.

Every stage has the same shape, `run(store, XParams) -> XResult`: a pydantic model in, a pydantic model out, the
stage's SQL beside its `schema.py`. Each call is recorded as one `stage_runs` row by `stage_run`: the parameters,
the seed, the code version (`failatlas.core.version.code_version`), start, end and seconds, the row counts the
stage reports, and how it ended (`ok`, `failed`, `interrupted`).

    with stage_run(store, "embed", params, seed=None) as run:
        ...                              # compute, then write in one or more transactions
        run.count("embeddings", n_new)   # rows written, by table
        run.note(device="cuda")          # anything else worth keeping
    result = EmbedResult(..., stage_run_id=run.id)

A stage whose resumability reads its own past runs records the row inside its final write transaction
(`run.record(conn)`), so the data and the record commit together; otherwise the row is written when the block
ends, also when it fails.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
from pydantic import BaseModel

from failatlas.core.errors import StoreError
from failatlas.core.store import Store
from failatlas.core.version import code_version


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _text(value: Any) -> Any:
    """`value` with every string made UTF-8 text: a lone surrogate (a file name that is not UTF-8, as Python
    decodes it) becomes its bytes' backslash escape, so the record can be written."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {_text(str(k)): _text(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_text(v) for v in value]
    return value if value is None or isinstance(value, bool | int | float) else _text(str(value))


def _params_json(params: BaseModel | dict[str, Any] | None) -> str:
    if params is None:
        return "{}"
    if isinstance(params, BaseModel):
        try:
            return params.model_dump_json()
        except ValueError:  # PydanticSerializationError: a string that is not UTF-8 text
            return json.dumps(_text(params.model_dump()), sort_keys=True, default=str)
    return json.dumps(_text(params), sort_keys=True, default=str)


class StageRun:
    """One stage run being recorded. `rows` counts rows written per table; `summary` holds the rest."""

    def __init__(self, stage: str, params: BaseModel | dict[str, Any] | None, seed: int | None,
                 run_id: str | None = None) -> None:
        self.id = run_id or f"{stage}:{uuid.uuid4().hex[:16]}"
        self.stage = stage
        self.params_json = _params_json(params)
        self.seed = seed
        self.code_version = code_version()
        self.started_at = _now()
        self._t0 = time.perf_counter()
        self.rows: dict[str, int] = {}
        self.summary: dict[str, Any] = {}
        self.status: str | None = None
        self.seconds: float | None = None

    def count(self, table: str, n: int) -> None:
        """Add `n` rows written to `table`."""
        self.rows[table] = self.rows.get(table, 0) + int(n)

    def note(self, **items: Any) -> None:
        self.summary.update(items)

    def record(self, conn: Any, status: str = "ok") -> None:
        """Write (or rewrite) this run's row on `conn`, typically inside the stage's last write transaction."""
        self.status = status
        self.seconds = round(time.perf_counter() - self._t0, 3)
        conn.execute("DELETE FROM stage_runs WHERE id = ?", [self.id])
        conn.execute(
            "INSERT INTO stage_runs (id, stage, params, code_version, started_at, finished_at, status, summary,"
            " seed, seconds, rows) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [self.id, self.stage, self.params_json, self.code_version, self.started_at, _now(), status,
             json.dumps(self.summary, default=str), self.seed, self.seconds, json.dumps(self.rows)],
        )


@contextmanager
def stage_run(store: Store, stage: str, params: BaseModel | dict[str, Any] | None = None, *,
              seed: int | None = None, run_id: str | None = None) -> Iterator[StageRun]:
    """Record the enclosed stage run in `stage_runs` (see the module's docstring). Raises RuntimeError when entered
    inside an open `store.write()`: a failure's record would roll back with the stage's writes.

    On a failure, `rows` keeps only counts the stage recorded in a committed `run.record(conn)`; other counts move
    to `summary.rows_counted`, since the writes they counted may have rolled back. A run whose `ok` row committed
    with its data keeps that row even when the block fails afterwards."""
    if getattr(store._local, "conn", None) is not None:
        raise RuntimeError(f"stage '{stage}' started inside an open store.write(); start it outside")
    run = StageRun(stage, params, seed, run_id)
    try:
        yield run
    except BaseException as exc:
        try:
            committed = run.status == "ok" and bool(
                store.query("SELECT 1 FROM stage_runs WHERE id = ? AND status = 'ok'", [run.id]))
            if not committed:
                run.note(error=f"{type(exc).__name__}: {exc}"[:2000])
                if run.rows:
                    run.note(rows_counted=dict(run.rows))
                    run.rows = {}
                status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
                with store.write() as conn:
                    run.record(conn, status)
        except (StoreError, OSError, duckdb.Error):
            pass  # the original error matters more than its record
        raise
    if run.status is None:
        with store.write() as conn:
            run.record(conn, "ok")

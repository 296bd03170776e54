"""Every write of the taxonomy stage: a snapshot (taxonomy, categories, failure types) and insight assignments."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

import duckdb
import polars as pl

from failatlas.core.store import Store
from failatlas.taxonomy.model import FailureCategory, FailureType, SeedReport


def write_snapshot(
    conn: duckdb.DuckDBPyConnection,
    *,
    taxonomy_id: str,
    clustering_ids: list[str],
    embedding_set_id: str,
    embed_model: str,
    normalisation: str,
    params_json: str,
    code_version: str,
    created_at: dt.datetime,
    categories: list[FailureCategory],
    types: list[FailureType],
    seed_reports: list[SeedReport] | None = None,
    labelled_by: dict[str, str] | None = None,
) -> int:
    """Insert a taxonomy snapshot with its categories and failure types on `conn` (inside the caller's
    transaction); returns its version number (one more than the newest)."""
    version = conn.execute("SELECT coalesce(max(version), 0) + 1 FROM taxonomies").fetchall()[0][0]
    conn.execute(
        "INSERT INTO taxonomies (id, version, clustering_ids, embed_model, normalisation, embedding_set_id, params,"
        " code_version, created_at, seed_reports, labelled_by, current_since)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [taxonomy_id, version, json.dumps(clustering_ids), embed_model, normalisation, embedding_set_id,
         params_json, code_version, created_at,
         None if not seed_reports else json.dumps([r.model_dump() for r in seed_reports]),
         json.dumps(labelled_by) if labelled_by else None, _now()],
    )
    if categories:
        conn.executemany(
            "INSERT INTO failure_categories (taxonomy_id, id, phase, name, definition, keywords,"
            " naming_method, prompt, raw_reply) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                [
                    taxonomy_id,
                    c.id,
                    c.phase,
                    c.name,
                    c.definition,
                    json.dumps(c.keywords),
                    c.naming_method,
                    None if c.prompt is None else json.dumps(c.prompt),
                    c.raw_reply,
                ]
                for c in categories
            ],
        )
    _insert_types(conn, taxonomy_id, types)
    return int(version)


def write_assignments(store: Store, records: Sequence[tuple[str, str, str, float | None, str]]) -> None:
    """Insert or replace (taxonomy_id, insight_id, failure_type_id, similarity, method) rows, in one
    transaction."""
    frame = pl.DataFrame(
        list(records),
        schema={
            "taxonomy_id": pl.Utf8,
            "insight_id": pl.Utf8,
            "failure_type_id": pl.Utf8,
            "similarity": pl.Float64,
            "method": pl.Utf8,
        },
        orient="row",
    )
    with store.write() as conn:
        conn.register("new_assignments", frame.to_arrow())
        conn.execute(
            "INSERT OR REPLACE INTO insight_failure_types"
            " (taxonomy_id, insight_id, failure_type_id, similarity, method) SELECT * FROM new_assignments"
        )
        conn.unregister("new_assignments")


def _insert_types(conn: duckdb.DuckDBPyConnection, taxonomy_id: str, types: list[FailureType]) -> None:
    if types:
        conn.executemany(
            "INSERT INTO failure_types (taxonomy_id, id, phase, category_id, name, definition,"
            " inclusion_criteria, examples, keywords, centroid, n_insights, merged_from, naming_method,"
            " prompt, raw_reply, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                [
                    taxonomy_id,
                    t.id,
                    t.phase,
                    t.category_id,
                    t.name,
                    t.definition,
                    json.dumps(t.inclusion_criteria),
                    json.dumps([e.model_dump() for e in t.examples]),
                    json.dumps(t.keywords),
                    t.centroid,
                    t.n_insights,
                    json.dumps(t.merged_from),
                    t.naming_method,
                    None if t.prompt is None else json.dumps(t.prompt),
                    t.raw_reply,
                    t.origin,
                ]
                for t in types
            ],
        )


def replace_types(
    conn: duckdb.DuckDBPyConnection,
    taxonomy_id: str,
    types: list[FailureType],
    records: Sequence[tuple[str, str, float | None, str]],
) -> None:
    """Replace a snapshot's failure types and insight assignments ((type id, insight id, cosine, method) rows) on
    `conn`, inside the caller's transaction (an edit)."""
    conn.execute("DELETE FROM insight_failure_types WHERE taxonomy_id = ?", [taxonomy_id])
    conn.execute("DELETE FROM failure_types WHERE taxonomy_id = ?", [taxonomy_id])
    _insert_types(conn, taxonomy_id, types)
    if records:
        frame = pl.DataFrame(
            [(taxonomy_id, i, t, s, m) for t, i, s, m in records],
            schema={"taxonomy_id": pl.Utf8, "insight_id": pl.Utf8, "failure_type_id": pl.Utf8,
                    "similarity": pl.Float64, "method": pl.Utf8},
            orient="row",
        )
        conn.register("edited_assignments", frame.to_arrow())
        conn.execute(
            "INSERT INTO insight_failure_types (taxonomy_id, insight_id, failure_type_id, similarity, method)"
            " SELECT * FROM edited_assignments"
        )
        conn.unregister("edited_assignments")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def make_current(store: Store, taxonomy_id: str) -> None:
    """Make a stored snapshot the current one (what every reader of "the newest" opens), as a build that finds
    its snapshot already stored does: removing a label and building again brings the first build back."""
    with store.write() as conn:
        conn.execute("UPDATE taxonomies SET current_since = ? WHERE id = ?", [_now(), taxonomy_id])

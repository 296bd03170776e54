"""Read-only queries behind the Drill-down: the ready-made entry points, a failure type's counts, insights and
runs, search by text and by meaning, and where an insight was stated (its sources and the imported records).
Conventions as in `queries_store`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from failatlas.appdata.queries_store import json_value, read_frame
from failatlas.appdata.queries_taxonomy import taxonomy_types
from failatlas.bench_core.agent_order import REFERENCE_AGENTS
from failatlas.core.store import Store


# -- drill-down -------------------------------------------------------------------------------------------------
# Ready-made entry points: unions of kinds (failatlas.ingest.kinds), the facet mining gave every insight from the
# harness's evidence. A failure type belongs to an entry point when its insights' kind is one of the entry's; types
# never mix kinds, so an entry point holds nothing else and a kind is never under both.
def _entry_points() -> dict[str, dict[str, Any]]:
    from failatlas.ingest.kinds import ENTRY_POINT_KINDS, ENVIRONMENT, MISSING_COMPONENT

    return {"missing implementation components": {"kinds": ENTRY_POINT_KINDS[MISSING_COMPONENT]},
            "environment / dependency misconfiguration": {"kinds": ENTRY_POINT_KINDS[ENVIRONMENT]}}


ENTRY_POINTS: dict[str, dict[str, Any]] = _entry_points()


def entry_point_types(store: Store, taxonomy_id: str, name: str) -> pl.DataFrame:
    """The failure types of a named entry point, largest first: those whose insights are of the entry's kinds.
    `kind` is the types' kind, `n_runs` the runs their insights came from, `evidence` the share of a type's insights
    of the entry's kinds (1.0: types do not mix kinds)."""
    kinds = list(ENTRY_POINTS[name]["kinds"])
    facts = read_frame(store, """
        SELECT ift.failure_type_id, any_value(i.kind) AS kind, count(DISTINCT i.id) AS n_kind_insights,
               count(DISTINCT s.run_id) AS n_runs
        FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id
        LEFT JOIN insight_sources s ON s.insight_id = i.id
        WHERE ift.taxonomy_id = ? AND list_contains(?, i.kind) GROUP BY ift.failure_type_id""",
                   [taxonomy_id, kinds])
    types = taxonomy_types(store, taxonomy_id)
    joined = types.join(facts, on="failure_type_id", how="inner")
    return (joined.with_columns((pl.col("n_kind_insights") / pl.col("n_insights").clip(1, None)).alias("evidence"))
            .sort(["n_insights", "failure_type_id"], descending=[True, False]))


def entry_point_totals(store: Store, taxonomy_id: str) -> dict[str, tuple[int, int]]:
    """Per entry point: (insights, runs) of this snapshot whose kind is one of the entry's."""
    out = {}
    for name, spec in ENTRY_POINTS.items():
        row = store.query("""
            SELECT count(DISTINCT i.id), count(DISTINCT s.run_id)
            FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id
            LEFT JOIN insight_sources s ON s.insight_id = i.id
            WHERE ift.taxonomy_id = ? AND ift.failure_type_id <> 'unassigned' AND list_contains(?, i.kind)""",
                          [taxonomy_id, list(spec["kinds"])])
        out[name] = (int(row[0][0]), int(row[0][1]))
    return out

_SOURCE_FILTERS = {"agent": "coalesce(s.agent, r.agent)", "model": "coalesce(s.model, r.model)",
                   "benchmark": "coalesce(s.benchmark, r.benchmark)", "paper": "s.paper_id"}


def type_counts(store: Store, taxonomy_id: str, dimension: str | None = None,
                value: str | None = None) -> pl.DataFrame:
    """Per failure type the three units the pages name, so no number stands without its unit: `insights`
    (distinct insight texts), `occurrences` (statements: one per source row, as the share of insights counts
    them) and `runs` (distinct runs the type shows in); optionally only the sources of one agent, model,
    benchmark or paper."""
    where, params = "ift.taxonomy_id = ?", [taxonomy_id]
    if dimension is not None and value is not None:
        if dimension not in _SOURCE_FILTERS:
            raise ValueError(f"unknown filter dimension {dimension!r}")
        where += f" AND {_SOURCE_FILTERS[dimension]} = ?"
        params.append(value)
    return read_frame(store, f"""
        SELECT ift.failure_type_id, count(DISTINCT ift.insight_id) AS insights,
               sum(CASE WHEN s.insight_id IS NULL THEN i.n_occurrences ELSE 1 END) AS occurrences,
               count(DISTINCT s.run_id) AS runs
        FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id
        LEFT JOIN insight_sources s ON s.insight_id = ift.insight_id LEFT JOIN runs r ON r.id = s.run_id
        WHERE {where} GROUP BY ALL""", params)  # noqa: S608 - the filter column is one of four names


def type_runs(store: Store, taxonomy_id: str, failure_type_ids: tuple[str, ...], per_type: int = 4) -> pl.DataFrame:
    """For each failure type, its most representative stored runs, at most `per_type` each: the runs of the agents
    under study before the reference agents' (`gold`, `null`: baselines; a null run leaves every masked part
    unimplemented by construction, so it held most of a type's occurrences and came before the fault-injecting
    agent's own run, issue 54), then the runs holding most of its occurrences, then by agent and task. Each with
    its agent, task, status, the validator's outcome and the monitor's verdict, so a page can open a run's diff and
    validator log in one click."""
    reference = "r.agent IN (" + ", ".join(f"'{a}'" for a in REFERENCE_AGENTS) + ")"
    return read_frame(store, f"""
        WITH hits AS (
            SELECT ift.failure_type_id, s.run_id, count(*) AS occurrences
            FROM insight_failure_types ift JOIN insight_sources s ON s.insight_id = ift.insight_id
            WHERE ift.taxonomy_id = ? AND ift.failure_type_id IN (SELECT unnest(?::VARCHAR[])) AND s.run_id IS NOT NULL
            GROUP BY ALL)
        SELECT h.failure_type_id, h.run_id, h.occurrences, r.agent, r.task_id, r.status AS run_status,
               v.outcome AS validator_outcome, m.verdict AS monitor_verdict
        FROM hits h JOIN runs r ON r.id = h.run_id LEFT JOIN validations v ON v.run_id = r.id
        LEFT JOIN (SELECT run_id, CASE WHEN bool_or(severity = 'fail') THEN 'flagged'
                                       WHEN bool_or(severity = 'warn') THEN 'warned' ELSE 'clean' END AS verdict
                   FROM monitor_findings GROUP BY run_id) m ON m.run_id = r.id
        QUALIFY row_number() OVER (PARTITION BY h.failure_type_id
                                   ORDER BY {reference}, h.occurrences DESC, r.agent, r.task_id, r.id) <= ?
        ORDER BY h.failure_type_id, {reference}, h.occurrences DESC, r.agent, r.task_id, r.id""",
                  [taxonomy_id, list(failure_type_ids), int(per_type)])


def type_insights(store: Store, taxonomy_id: str, failure_type_id: str, *, search: str = "", limit: int = 50,
                  offset: int = 0) -> tuple[pl.DataFrame, int]:
    """One page of a failure type's insights (most frequent first) and how many there are in all; `search`
    keeps insights whose text contains it (case-insensitive)."""
    where = "ift.taxonomy_id = ? AND ift.failure_type_id = ? AND contains(lower(i.text), lower(?))"
    params: list[Any] = [taxonomy_id, failure_type_id, search]
    with store.read() as conn:
        total = conn.execute(
            f"SELECT count(*) FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id WHERE {where}",
            params).fetchall()[0][0]
        page = conn.sql(
            "SELECT i.id AS insight_id, i.phase, i.text, i.n_occurrences, ift.similarity, ift.method"
            f" FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id WHERE {where}"
            " ORDER BY i.n_occurrences DESC, ift.similarity DESC NULLS LAST, i.id LIMIT ? OFFSET ?",
            params=[*params, int(limit), int(offset)]).to_arrow_table()
    return pl.from_arrow(page), int(total)  # type: ignore[return-value]


def search_insights(store: Store, text: str, taxonomy_id: str | None = None, *, limit: int = 50,
                    offset: int = 0) -> tuple[pl.DataFrame, int]:
    """Insights whose text contains `text` (case-insensitive), with their failure type in the taxonomy."""
    with store.read() as conn:
        total = conn.execute("SELECT count(*) FROM insights WHERE contains(lower(text), lower(?))",
                             [text]).fetchall()[0][0]
        page = conn.sql(
            "SELECT i.id AS insight_id, i.phase, i.text, i.n_occurrences, ift.failure_type_id,"
            " coalesce(t.name, CASE WHEN ift.failure_type_id = 'unassigned' THEN 'Unassigned' END) AS failure_type"
            " FROM insights i"
            " LEFT JOIN insight_failure_types ift ON ift.insight_id = i.id AND ift.taxonomy_id = ?"
            " LEFT JOIN failure_types t ON t.taxonomy_id = ift.taxonomy_id AND t.id = ift.failure_type_id"
            " WHERE contains(lower(i.text), lower(?))"
            " ORDER BY i.n_occurrences DESC, i.id LIMIT ? OFFSET ?",
            params=[taxonomy_id, text, int(limit), int(offset)]).to_arrow_table()
    return pl.from_arrow(page), int(total)  # type: ignore[return-value]


_EMBEDDERS: dict[str, Any] = {}
_VECTORS: dict[tuple[str, str, float], tuple[list[str], Any]] = {}


def semantic_search(store: Store, text: str, taxonomy_id: str, *, limit: int = 50) -> pl.DataFrame:
    """The taxonomy's insights closest in meaning to `text`: the query is embedded with the model of the embedding
    set the taxonomy was built on and compared (cosine) with the stored vectors. Raises NotFoundError when the
    model is not on this machine or its revision differs from the stored vectors'."""
    import numpy as np

    from failatlas.core.errors import NotFoundError
    from failatlas.embed import get_embedder, get_set, load_insight_vectors, normaliser_named

    rows = store.query("SELECT embedding_set_id FROM taxonomies WHERE id = ?", [taxonomy_id])
    if not rows or not rows[0][0]:
        raise NotFoundError(f"taxonomy {taxonomy_id} records no embedding set", hint="search the text instead")
    embedding_set = get_set(store, rows[0][0])
    if embedding_set.model not in _EMBEDDERS:
        _EMBEDDERS[embedding_set.model] = get_embedder(embedding_set.model)
    embedder = _EMBEDDERS[embedding_set.model]
    if embedder.revision != embedding_set.revision:
        raise NotFoundError(f"the stored vectors are of {embedding_set.model} revision {embedding_set.revision}; "
                            f"this machine has {embedder.revision}", hint="search the text instead")
    key = (str(store.path), embedding_set.id, store.path.stat().st_mtime)
    if key not in _VECTORS:
        _VECTORS.clear()
        found = load_insight_vectors(store, embedding_set)
        _VECTORS[key] = (found.ids, np.asarray(found.vectors, dtype=np.float32))
    ids, vectors = _VECTORS[key]
    query = np.asarray(embedder.encode(normaliser_named(embedding_set.normalisation)([text])), dtype=np.float32)[0]
    similarity = vectors @ query / np.maximum(np.linalg.norm(vectors, axis=1) * np.linalg.norm(query), 1e-12)
    best = np.argsort(-similarity)[: int(limit)]
    hits = pl.DataFrame({"insight_id": [ids[k] for k in best], "similarity": similarity[best].astype(float)})
    if hits.height == 0:
        return hits
    with store.read() as conn:
        conn.register("hits", hits.to_arrow())
        table = conn.sql(
            "SELECT h.insight_id, h.similarity, i.phase, i.text, i.n_occurrences, ift.failure_type_id,"
            " coalesce(t.name, CASE WHEN ift.failure_type_id = 'unassigned' THEN 'Unassigned' END) AS failure_type"
            " FROM hits h JOIN insights i ON i.id = h.insight_id"
            " LEFT JOIN insight_failure_types ift ON ift.insight_id = i.id AND ift.taxonomy_id = ?"
            " LEFT JOIN failure_types t ON t.taxonomy_id = ift.taxonomy_id AND t.id = ift.failure_type_id"
            " ORDER BY h.similarity DESC, h.insight_id", params=[taxonomy_id]).to_arrow_table()
    return pl.from_arrow(table)  # type: ignore[return-value]


def insight_sources(store: Store, insight_id: str, limit: int = 200) -> pl.DataFrame:
    """Where an insight was stated: its source rows with run, task, agent, model, benchmark and field."""
    return read_frame(store, """
        SELECT s.run_id, s.task_id, s.agent, s.model, s.benchmark, s.paper_id, s.origin, s.extractor,
               s.source_field, s.source_file, s.source_line, s.label, s.detail,
               (r.id IS NOT NULL) AS run_stored, r.status AS run_status, v.outcome AS validator_outcome
        FROM insight_sources s LEFT JOIN runs r ON r.id = s.run_id LEFT JOIN validations v ON v.run_id = r.id
        WHERE s.insight_id = ? ORDER BY s.run_id NULLS LAST, s.source_key LIMIT ?""", [insight_id, int(limit)])


SOURCE_RECORD_MAX_BYTES = 64 * 1024 * 1024  # an annotation file larger than this is not opened
_INDEX = re.compile(r"([A-Za-z_][\w-]*)|\[(\d+)\]")


def source_record(source_file: str | None, source_line: int | None, source_field: str | None) -> dict | None:
    """The imported record an insight was read from, as the file holds it today: line `source_line` of a JSONL
    file, or the object that `source_field` (`errors[3].description`) points into in a JSON file; None when the
    file is gone, too large, or no longer holds it. Read-only and bounded (one line, or one file under
    SOURCE_RECORD_MAX_BYTES)."""
    if not source_file:
        return None
    path = Path(source_file)
    try:
        if not path.is_file() or path.stat().st_size > SOURCE_RECORD_MAX_BYTES:
            return None
        if source_line is not None:
            with path.open("rb") as handle:
                for number, raw in enumerate(handle, start=1):
                    if number == source_line:
                        record = json.loads(raw.decode("utf-8", errors="replace"))
                        return record if isinstance(record, dict) else None
            return None
        node: Any = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    parent = node
    for name, index in _INDEX.findall((source_field or "").rsplit(".", 1)[0] if "." in (source_field or "") else ""):
        try:
            node = node[name] if name else node[int(index)]
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(node, dict):
        keep = {k: v for k, v in parent.items() if isinstance(v, str | int | float)} if isinstance(parent, dict) else {}
        return {**{k: v for k, v in keep.items() if k != "errors"}, **node}
    return None


def insight_records(store: Store, insight_id: str, limit: int = 20) -> list[dict[str, Any]]:
    """For an insight imported from files (TRAIL, Inspect logs, JSONL): per source, the trace id, the human label,
    the importer's details and the source record itself (`source_record`), so the app can show what the
    annotator saw. Sources backed by a stored run are left out (the run shows them)."""
    sources = insight_sources(store, insight_id, limit=limit).filter(~pl.col("run_stored"))
    out = []
    for r in sources.iter_rows(named=True):
        detail = json_value(r["detail"]) or {}
        if not isinstance(detail, dict):
            detail = {"detail": detail}
        out.append({
            "origin": r["origin"], "trace_id": detail.get("trace_id") or r["run_id"] or r["task_id"],
            "label": r["label"], "benchmark": r["benchmark"], "agent": r["agent"], "model": r["model"],
            "source_file": r["source_file"], "source_line": r["source_line"], "source_field": r["source_field"],
            "detail": detail, "record": source_record(r["source_file"], r["source_line"], r["source_field"]),
        })
    return out


def insight_text(store: Store, insight_id: str) -> dict[str, Any] | None:
    """One insight's phase, text and occurrence count."""
    rows = store.query_dicts("SELECT id, phase, text, n_occurrences FROM insights WHERE id = ?", [insight_id])
    return rows[0] if rows else None

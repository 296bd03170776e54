"""Read-only queries behind the Map: a phase's 2-D projection of the taxonomy's insights, and the phases to offer.
Conventions as in `queries_store`."""

from __future__ import annotations

import polars as pl

from failatlas.core.store import Store


def map_points(store: Store, taxonomy_id: str, phase: str, *, limit: int = 20000) -> tuple[pl.DataFrame, int]:
    """The phase's 2-D projection (stored by `cluster` in `cluster_assignments.x/y` for the clustering the taxonomy
    was built from; when `cluster run` left the map for later, computed as `cluster finish` would, by
    `cluster.finish.assignments_with_map`, without writing), coloured by failure type, with each insight's most
    common human label. At most `limit` points, a deterministic sample when there are more; returns the points and
    how many there are in all."""
    from failatlas.cluster.finish import assignments_with_map

    ids = [r[0] for r in store.query(
        "SELECT unnest(CAST(clustering_ids AS VARCHAR[])) FROM taxonomies WHERE id = ?", [taxonomy_id])]
    computed = assignments_with_map(store, ids, phase) if ids else None
    source = "computed_map" if computed is not None else "cluster_assignments"
    sql_from = f"""
        FROM {source} a
        JOIN insights i ON i.id = a.insight_id
        JOIN insight_failure_types ift ON ift.insight_id = a.insight_id AND ift.taxonomy_id = ?
        LEFT JOIN failure_types t ON t.taxonomy_id = ift.taxonomy_id AND t.id = ift.failure_type_id
        WHERE a.clustering_id IN (SELECT unnest(CAST(clustering_ids AS VARCHAR[])) FROM taxonomies WHERE id = ?)
          AND i.phase = ? AND a.x IS NOT NULL AND a.y IS NOT NULL"""
    params = [taxonomy_id, taxonomy_id, phase]
    with store.read() as conn:
        if computed is not None:
            conn.register("computed_map", computed)
        total = conn.execute(f"SELECT count(*) {sql_from}", params).fetchall()[0][0]  # noqa: S608
        table = conn.sql(
            "SELECT a.insight_id, a.x, a.y, i.text, ift.failure_type_id,"
            " coalesce(t.name, 'Unassigned') AS failure_type,"
            " coalesce((SELECT mode(s.label) FROM insight_sources s WHERE s.insight_id = a.insight_id),"
            " '(no label)') AS human_label"
            f" {sql_from} ORDER BY hash(a.insight_id) LIMIT ?", params=[*params, int(limit)]).to_arrow_table()
    return pl.from_arrow(table), int(total)  # type: ignore[return-value]


def phase_sizes(store: Store, taxonomy_id: str) -> dict[str, int]:
    """Insights assigned per phase in the snapshot (the Map opens on the largest)."""
    rows = store.query(
        "SELECT i.phase, count(*) FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id"
        " WHERE ift.taxonomy_id = ? GROUP BY 1", [taxonomy_id])
    return {r[0]: int(r[1]) for r in rows}


def taxonomy_phases(store: Store, taxonomy_id: str) -> list[str]:
    """Phases that have failure types in the snapshot, in paper order."""
    from failatlas.taxonomy.model import phase_rank

    rows = store.query("SELECT DISTINCT phase FROM failure_types WHERE taxonomy_id = ?", [taxonomy_id])
    return sorted((r[0] for r in rows), key=lambda p: (phase_rank(p), p))

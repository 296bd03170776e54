"""Reading stored taxonomy snapshots back as typed records."""

from __future__ import annotations

import json

import polars as pl

from failatlas.core.store import Store
from failatlas.core.tables import code_span, one_line
from failatlas.taxonomy.assign import CURRENT_FIRST, resolve_taxonomy
from failatlas.taxonomy.inputs import query_frame
from failatlas.taxonomy.model import (
    BuildParams,
    Example,
    FailureCategory,
    FailureType,
    SeedReport,
    Taxonomy,
    phase_rank,
)


def list_taxonomies(store: Store) -> pl.DataFrame:
    """One row per snapshot, the current one first (`CURRENT_FIRST`: the one every reader of "the newest" opens),
    then the others by when they were current: id, version, created_at, current (true for the first row),
    embed_model, clustering_ids and counts."""
    return query_frame(
        store,
        f"SELECT t.id, t.version, t.created_at, row_number() OVER (ORDER BY {CURRENT_FIRST}) = 1 AS current,"  # noqa: S608
        " t.embed_model, t.clustering_ids,"
        " (SELECT count(*) FROM failure_types f WHERE f.taxonomy_id = t.id) AS n_types,"
        " (SELECT count(*) FROM failure_categories c WHERE c.taxonomy_id = t.id) AS n_categories,"
        " (SELECT count(*) FROM insight_failure_types a WHERE a.taxonomy_id = t.id) AS n_insights"
        f" FROM taxonomies t ORDER BY {CURRENT_FIRST}",
    )


def load_taxonomy(store: Store, taxonomy_id: str | None = None) -> Taxonomy:
    """A stored snapshot (default: the current one, `resolve_taxonomy`) with its categories and types. Raises
    NotFoundError."""
    taxonomy_id = resolve_taxonomy(store, taxonomy_id)
    with store.read() as conn:
        head = conn.execute(
            "SELECT version, clustering_ids, embed_model, params, code_version, normalisation, embedding_set_id,"
            " seed_reports, labelled_by"
            " FROM taxonomies"
            " WHERE id = ?",
            [taxonomy_id],
        ).fetchone()
        cats = conn.execute(
            "SELECT id, phase, name, definition, keywords, naming_method, prompt, raw_reply"
            " FROM failure_categories WHERE taxonomy_id = ? ORDER BY id",
            [taxonomy_id],
        ).fetchall()
        types = conn.execute(
            "SELECT id, phase, category_id, name, definition, inclusion_criteria, examples, keywords,"
            " centroid, n_insights, merged_from, naming_method, prompt, raw_reply, origin FROM failure_types"
            " WHERE taxonomy_id = ?"
            " ORDER BY id",
            [taxonomy_id],
        ).fetchall()
        counts = dict(
            conn.execute(
                "SELECT failure_type_id = 'unassigned', count(*) FROM insight_failure_types"
                " WHERE taxonomy_id = ?"
                " GROUP BY 1",
                [taxonomy_id],
            ).fetchall()
        )
    categories = [
        FailureCategory(
            id=c[0],
            phase=c[1],
            name=c[2],
            definition=c[3],
            keywords=json.loads(c[4]),
            naming_method=c[5],
            prompt=None if c[6] is None else json.loads(c[6]),
            raw_reply=c[7],
        )
        for c in cats
    ]
    failure_types = [
        FailureType(
            id=t[0],
            phase=t[1],
            category_id=t[2],
            name=t[3],
            definition=t[4],
            inclusion_criteria=json.loads(t[5]),
            examples=[Example(**e) for e in json.loads(t[6])],
            keywords=json.loads(t[7]),
            centroid=list(t[8]),
            n_insights=t[9],
            merged_from=json.loads(t[10]),
            naming_method=t[11],
            prompt=None if t[12] is None else json.loads(t[12]),
            raw_reply=t[13],
            origin=t[14] or "cluster",
        )
        for t in types
    ]
    failure_types.sort(key=lambda t: (phase_rank(t.phase), t.phase, t.id))
    categories.sort(key=lambda c: (phase_rank(c.phase), c.phase, c.id))
    return Taxonomy(
        id=taxonomy_id,
        version=head[0],
        clustering_ids=json.loads(head[1]),
        embed_model=head[2],
        normalisation=head[5],
        embedding_set_id=head[6],
        params=BuildParams.model_validate_json(head[3]),
        code_version=head[4],
        categories=categories,
        types=failure_types,
        n_assigned=counts.get(False, 0),
        n_unassigned=counts.get(True, 0),
        seed_reports=[SeedReport(**r) for r in json.loads(head[7] or "[]")],
        labelled_by=json.loads(head[8]) if head[8] else {},
    )


def types_markdown(taxonomy: Taxonomy) -> str:
    """Every failure type with its definition, criteria and representative insights (ids included): the
    appendix that makes each name traceable to the insights behind it. Names, definitions, criteria and insight
    texts come from labels, seed files, LLM replies and imported or agents' text: each is written on one line and
    inert (`one_line(..., markdown=...)`: no control character, HTML, link or block of its own); ids stand in code
    spans."""
    def md(text: object) -> str:
        return one_line(text, markdown="cell")

    def md_line(text: object) -> str:
        return one_line(text, markdown="line")

    out = [f"# Taxonomy v{taxonomy.version} ({md(taxonomy.id)})", ""]
    cats = {c.id: c for c in taxonomy.categories}
    for t in taxonomy.types:
        cat = cats.get(t.category_id)
        origin = {"seed": " From the seed taxonomy.", "new": " New: not in the seed taxonomy."}.get(t.origin, "")
        out += [
            f"## {md_line(t.id)}: {md(t.name)}",
            "",
            f"Phase: {md(t.phase)}. Category: {md(cat.name) if cat else 'none (the type stands alone)'}. "
            f"Insights: {t.n_insights}. Named by: {md(t.naming_method)}. "
            f"From clusters: {', '.join(md(m) for m in t.merged_from)}." + origin,
            "",
            md_line(t.definition),
            "",
            "Inclusion criteria:",
            "",
        ]
        out += [f"- {md_line(c)}" for c in t.inclusion_criteria]
        out += ["", "Representative insights:", ""]
        out += [f"- {code_span(e.insight_id)} (cos {e.similarity:.2f}): {md(e.text)}" for e in t.examples]
        out.append("")
    return "\n".join(out)

"""Every read-only query behind the explorer's pages, under one name: a re-export of the modules that hold them,
split by concern. Import from here or from the module itself; the cache (`cache.q`) looks a query up in each.

- `queries_store`: the store's status, what to run next, the Overview's tables (and the shared read helpers).
- `queries_taxonomy`: taxonomy snapshots, prevalence, Compare, the failure types and the export files.
- `queries_insights`: the Drill-down's entry points, a failure type's insights and runs, search, an insight's
  sources and imported records.
- `queries_run_view`: one run's view.
- `queries_map`: the Map's points and phases.

The run list, the task view and the run diff read through `queries_runs`; the score breakdowns through
`queries_groups`.
"""

from __future__ import annotations

from failatlas.appdata.queries_insights import (
    ENTRY_POINTS,
    SOURCE_RECORD_MAX_BYTES,
    entry_point_totals,
    entry_point_types,
    insight_records,
    insight_sources,
    insight_text,
    search_insights,
    semantic_search,
    source_record,
    type_counts,
    type_insights,
    type_runs,
)
from failatlas.appdata.queries_map import map_points, phase_sizes, taxonomy_phases
from failatlas.appdata.queries_run_view import run_detail
from failatlas.appdata.queries_store import (
    PIPELINE,
    STATUS_TABLES,
    StoreStatus,
    funnel_frame,
    imported_overview,
    llm_spend,
    next_steps,
    runs_overview,
    runs_page,
    score_summary,
    store_status,
    twin_run_count,
)
from failatlas.appdata.queries_taxonomy import (
    DIMENSIONS,
    Dimension,
    compare_frame,
    compare_options,
    compare_totals,
    export_files,
    filter_options,
    prevalence_frame,
    taxonomies,
    taxonomy_types,
    view_files,
)

__all__ = [
    "DIMENSIONS", "ENTRY_POINTS", "PIPELINE", "SOURCE_RECORD_MAX_BYTES", "STATUS_TABLES", "Dimension", "StoreStatus",
    "compare_frame", "compare_options", "compare_totals", "entry_point_totals", "entry_point_types", "export_files",
    "filter_options", "funnel_frame", "imported_overview", "insight_records", "insight_sources", "insight_text",
    "llm_spend", "map_points", "next_steps", "phase_sizes", "prevalence_frame", "run_detail", "runs_overview",
    "runs_page", "score_summary", "search_insights", "semantic_search", "source_record", "store_status",
    "taxonomies", "taxonomy_phases", "taxonomy_types", "twin_run_count", "type_counts", "type_insights", "type_runs",
    "view_files",
]

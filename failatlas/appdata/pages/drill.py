"""Drill-down: failure type -> its insights (click a row) -> one run (click its button; the run opens on its own
view: judges, validator log, diff, steps, task, monitor) or, for imported data, the source record. Reachable by
query parameters (`?page=drill&failure_type=...&insight=...&run=...`), with two ready-made entry points and a
search over insights, by words or by meaning. An insight, a selection of a type's insights or the whole type can be
labelled with a category (`pages/editing.py`, which writes through `failatlas.appdata.actions`)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from failatlas.appdata import queries
from failatlas.appdata.label_queries import lq
from failatlas.appdata.pages import editing
from failatlas.appdata.pages.common import (
    Context,
    code,
    fit_text_columns,
    go,
    keep,
    md,
    paginate,
    param,
    request_scroll,
    scroll_if_requested,
    show_next_steps,
)
from failatlas.appdata.pages.run_view import render_run, run_label
from failatlas.appdata.queries_store import json_value
from failatlas.core.errors import FailAtlasError
from failatlas.core.tables import counted
from failatlas.ingest.kinds import kind_name

PAGE_SIZE = 50
MAX_RUN_BUTTONS = 20
MAX_ENTRY_TYPES = 8
ENTRY_RUNS = 2  # run buttons under each type of an entry point


def _entry_points(ctx: Context) -> None:
    totals = ctx.q("entry_point_totals", ctx.taxonomy_id)
    cols = st.columns(len(queries.ENTRY_POINTS))
    for col, name in zip(cols, queries.ENTRY_POINTS, strict=True):
        n_insights, n_runs = totals.get(name, (0, 0))
        label = f"{name.capitalize()} ({counted(n_insights, 'insight')}, {counted(n_runs, 'run')})"
        if col.button(label, key=f"entry_{name}", width="stretch"):
            go("drill", taxonomy=ctx.taxonomy_id, entry=name)
    entry = param("entry")
    if entry not in queries.ENTRY_POINTS:
        return
    matches = ctx.q("entry_point_types", ctx.taxonomy_id, entry)
    kinds = ", ".join(kind_name(k).lower() for k in queries.ENTRY_POINTS[entry]["kinds"])
    st.markdown(f"**{md(entry.capitalize())}**: the failure types whose insights are of its kinds ({md(kinds)}), "
                "largest first; kinds come from the evidence each insight was mined with. Under each, its most "
                "representative runs: one click opens a run's judges, validator log and diff.")
    if matches.height == 0:
        st.info("No failure type of this taxonomy is of these kinds; search the insights below instead.")
        return
    shown = matches.head(MAX_ENTRY_TYPES)
    ids = tuple(shown["failure_type_id"].to_list())
    counts = {r["failure_type_id"]: r for r in ctx.q("type_counts", ctx.taxonomy_id).iter_rows(named=True)}
    runs = ctx.q("type_runs", ctx.taxonomy_id, ids, per_type=ENTRY_RUNS) if ctx.status.has("runs") else None
    for r in shown.iter_rows(named=True):
        c = counts.get(r["failure_type_id"], {})
        label = f"{md(r['phase'])} · {md(r['failure_type'])} · {units(c)}"
        if st.button(label, key=f"entry_open_{r['failure_type_id']}", width="stretch"):
            request_scroll("type")
            go("drill", taxonomy=ctx.taxonomy_id, failure_type=r["failure_type_id"], entry=entry)
        mine = runs.filter(pl.col("failure_type_id") == r["failure_type_id"]) if runs is not None else None
        if mine is not None and mine.height:
            cols = st.columns([1, 11])
            cols[0].caption("runs")
            for run in mine.iter_rows(named=True):  # one per line: a run's label is read whole, never cut
                text = run_label(run["agent"], run["task_id"], run["run_status"], run["validator_outcome"])
                if cols[1].button(md(text), key=f"entry_run_{r['failure_type_id']}_{run['run_id']}", width="stretch",
                              help=f"{counted(run['occurrences'], 'occurrence')} of this type in the run"):
                    request_scroll("run")
                    go("drill", taxonomy=ctx.taxonomy_id, failure_type=r["failure_type_id"], entry=entry,
                       run=run["run_id"])
    if matches.height > MAX_ENTRY_TYPES:
        st.caption(f"{counted(matches.height - MAX_ENTRY_TYPES, 'more matching type')} in the failure type list "
                   "below.")


def units(c: dict) -> str:
    """A type's size in its three units, named: distinct insights, occurrences (statements), runs."""
    if not c:
        return "no insight"
    out = f"{counted(c['insights'], 'distinct insight')}, {counted(c['occurrences'], 'occurrence')}"
    return out + (f", in {counted(c['runs'], 'run')}" if c.get("runs") else "")


def _search(ctx: Context) -> None:
    modes = {"words": "Words in the text", "meaning": "Meaning (the stored embeddings)"}
    cols = st.columns([3, 2])
    text = cols[0].text_input("Search insights", value=param("search") or "", key="drill_search").strip()
    mode = cols[1].radio("Match", list(modes), format_func=modes.get, horizontal=True,
                         index=1 if param("mode") == "meaning" else 0, key="drill_search_mode")
    keep(search=text or None, mode=mode if mode == "meaning" else None)
    if not text:
        return
    if mode == "meaning":
        try:
            with st.spinner("Embedding the query with the taxonomy's model…"):
                hits = ctx.q("semantic_search", text, ctx.taxonomy_id, limit=PAGE_SIZE)
        except FailAtlasError as exc:
            st.warning(f"Search by meaning is not available: {md(exc.one_line())}")
            return
        st.caption(f"The {counted(hits.height, 'distinct insight')} closest in meaning to “{md(text)}” (cosine "
                   "similarity of the stored vectors). Click a row to open it.")
    else:
        _, total = ctx.q("search_insights", text, ctx.taxonomy_id, limit=1)
        limit, offset = paginate(total, "drill_search_page", PAGE_SIZE)
        hits, total = ctx.q("search_insights", text, ctx.taxonomy_id, limit=limit, offset=offset)
        st.caption(f"{counted(total, 'distinct insight')} contain{'s' if total == 1 else ''} “{md(text)}”. Click a row "
                   "to open it.")
    if hits.height == 0:
        return
    event = st.dataframe(hits, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                         key=f"drill_search_hits_{mode}_{text}")
    rows = event.selection.rows if event is not None else []
    if rows:
        row = hits.row(rows[0], named=True)
        if row["insight_id"] != param("insight"):
            request_scroll("insight")
            go("drill", taxonomy=ctx.taxonomy_id, failure_type=row["failure_type_id"], insight=row["insight_id"],
               search=text, mode=mode if mode == "meaning" else None)


def _type_and_insights(ctx: Context) -> None:
    types = ctx.q("taxonomy_types", ctx.taxonomy_id)
    options = [*types["failure_type_id"].to_list(), "unassigned"]
    labels = {r["failure_type_id"]: f"{r['phase']} · {r['failure_type']} ({r['failure_type_id']})"
              for r in types.iter_rows(named=True)} | {"unassigned": "Unassigned insights"}
    wanted = param("failure_type")
    st.subheader("Failure type", anchor="type")
    scroll_if_requested("type")
    # After an entry point and before a type is chosen, the box is empty: a preselected type would be unrelated.
    index = options.index(wanted) if wanted in options else (None if param("entry") else 0)
    chosen = st.selectbox("Failure type", options, index=index, format_func=labels.get, key=f"drill_type_{wanted}",
                          label_visibility="collapsed", placeholder="Choose a failure type (or one above)")
    if chosen is None:
        st.caption("No failure type chosen: pick one of the entry point's types above, or any type here.")
        return
    if chosen != wanted and (wanted is not None or param("entry")):
        go("drill", taxonomy=ctx.taxonomy_id, failure_type=chosen, entry=param("entry"))
    row = types.filter(pl.col("failure_type_id") == chosen)
    if row.height:
        r = row.row(0, named=True)
        category = f"category *{md(r['category'])}*" if r["category"] else "no category"
        c = next(ctx.q("type_counts", ctx.taxonomy_id).filter(pl.col("failure_type_id") == chosen)
                 .iter_rows(named=True), {})
        st.markdown(f"**{md(r['failure_type'])}** · {category} · {units(c)}")
        if r["objects"]:
            st.markdown(f"Objects (occurrences): {md(r['objects'])}")
        st.text(r["definition"])
        if st.button("Rename, merge or split this type (Taxonomy page)", key=f"drill_edit_{chosen}"):
            go("taxonomy", taxonomy=ctx.taxonomy_id, failure_type=chosen)
    _downloads(ctx, chosen)
    current = param("insight")
    if current and wanted is None:
        # An insight opened from a link without its type (e.g. not in this taxonomy).
        _insight(ctx, current, None)
        st.divider()
    within = st.text_input("Filter this type's insights", key=f"drill_within_{chosen}")
    _, total = ctx.q("type_insights", ctx.taxonomy_id, chosen, search=within, limit=1)
    limit, offset = paginate(total, f"drill_type_page_{chosen}", PAGE_SIZE)
    page, total = ctx.q("type_insights", ctx.taxonomy_id, chosen, search=within, limit=limit, offset=offset)
    st.caption(f"{counted(total, 'distinct insight')}" + (f" containing “{md(within)}”" if within else "")
               + ", most stated first (× = occurrences: the times it was stated). Click a row to see where it was "
               "stated and open its run.")
    if page.height == 0:
        return
    labelled = lq(ctx.path, "insight_labels", tuple(page["text"].to_list()))
    page = page.with_columns(pl.col("text").replace_strict({t: v["label"] for t, v in labelled.items()},
                                                           default=None, return_dtype=pl.Utf8).alias("your_label"))
    page = page.select("text", "your_label", "n_occurrences", "phase", "similarity", "method", "insight_id")
    # the insight's text wraps in its column, never cut (issue 42); the numbers keep fixed widths
    texts, row_height = fit_text_columns(page.with_columns(pl.col("your_label").fill_null("")), {
        "text": "insight", "your_label": "your label", "phase": "phase", "method": "method", "insight_id": "id"},
        fixed=35 + 125 + 95)
    event = st.dataframe(page, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                         key=f"drill_insights_{chosen}_{offset}_{within}", row_height=row_height,
                         column_config={**texts, "n_occurrences": st.column_config.NumberColumn(
                             "× (occurrences)", width=125), "similarity": st.column_config.NumberColumn(
                             "similarity", width=95)})
    rows = event.selection.rows if event is not None else []
    if rows:
        picked = page["insight_id"][rows[0]]
        if picked != current:
            request_scroll("insight")
            go("drill", taxonomy=ctx.taxonomy_id, failure_type=chosen, insight=picked, entry=param("entry"))
    if chosen != "unassigned":
        editing.type_labels(ctx, chosen, page, total)
    if current and wanted is not None:
        _insight(ctx, current, chosen)
    elif not current:
        st.caption("No insight selected.")


MIME = {".md": "text/markdown", ".csv": "text/csv", ".json": "application/json"}


def _downloads(ctx: Context, failure_type_id: str) -> None:
    """The type's drill-down as files, the same bytes `failatlas taxonomy export --type` writes: each insight, the
    runs it was stated in with their verdicts and evidence lines."""
    if not st.checkbox("Prepare this type's drill-down for download (each insight, its runs, their verdicts and "
                       "evidence)", key=f"drill_download_{failure_type_id}"):
        return
    files = ctx.q("drilldown_files", ctx.taxonomy_id, failure_type_id)
    cols = st.columns(len(files))
    for col, (name, data) in zip(cols, files.items(), strict=True):
        col.download_button(f"Download {name}", data, file_name=name, mime=MIME.get(name[name.rfind("."):]),
                            key=f"drill_dl_{name}")
    st.caption(f"The same files as {code(f'failatlas taxonomy export --type {failure_type_id}')}.")


def _records(ctx: Context, insight_id: str) -> None:
    """The imported source records of an insight: trace id, human label, evidence, the record itself."""
    records = ctx.q("insight_records", insight_id)
    if not records:
        return
    st.markdown(f"**Source record{'s' if len(records) > 1 else ''}** (imported; no stored run behind it)")
    for rec in records[:10]:
        detail, record = rec["detail"], rec["record"] or {}
        st.markdown(f"{md(rec['origin'] or 'import')} · trace {code(rec['trace_id'] or '–')} · human label "
                    f"**{md(rec['label'] or '–')}**"
                    + (f" · {md(detail['category_top'])} › {md(detail['category_mid'])}"
                       if detail.get("category_top") and detail.get("category_mid") else "")
                    + (f" · impact {md(detail['impact'])}" if detail.get("impact") else "")
                    + (f" · span {code(detail['location'])}" if detail.get("location") else ""))
        evidence = record.get("evidence")
        if evidence:
            st.caption("Evidence (the annotated span of the trace)")
            st.text(str(evidence)[:20_000])
        description = record.get("description")
        if description and description != evidence:
            st.caption("Annotator's description")
            st.text(str(description)[:20_000])
        where = f"{rec['source_file']}" + (f":{rec['source_line']}" if rec["source_line"] else "")
        st.caption(f"From {code(where)}" + (f" ({md(rec['source_field'])})" if rec["source_field"] else "")
                   + ("" if rec["record"] else " · the file is not readable here, so only the stored details show"))
        with st.expander("The whole record"):
            st.json(rec["record"] or detail, expanded=True)


def _consequences(sources: pl.DataFrame) -> None:
    """The later phases' statements of this failure (ingest/consequences.py): seen again, counted here once."""
    details = [v for v in map(json_value, sources["detail"].to_list()) if isinstance(v, dict)]
    seen = dict.fromkeys((c.get("phase"), c.get("text")) for d in details
                         for c in d.get("consequences") or [] if isinstance(c, dict))
    if seen:
        st.markdown("**Also seen later in the same run** (consequences, counted once here): "
                    + "; ".join(f"{md(phase)}: {md(text)}" for phase, text in seen))


def _insight(ctx: Context, insight_id: str, failure_type: str | None) -> None:
    info = ctx.q("insight_text", insight_id)
    st.subheader("Insight", anchor="insight")
    scroll_if_requested("insight")
    if info is None:
        st.warning(f"No insight {code(insight_id)} in the store.")
        return
    st.text(info["text"])
    sources = ctx.q("insight_sources", insight_id)
    runs_named = sources["run_id"].drop_nulls().n_unique()
    st.markdown(f"{code(insight_id)} · phase {md(info['phase'])} · stated {info['n_occurrences']}× "
                f"({counted(info['n_occurrences'], 'occurrence')}"
                + (f" in {counted(runs_named, 'run')})" if runs_named else ")"))
    _consequences(sources)
    stored = sources.filter(pl.col("run_stored")).unique("run_id", keep="first", maintain_order=True)
    if stored.height:
        st.markdown("**Open a run** (agent · task · outcome)")
        cols = st.columns(min(stored.height, 2))
        for k, r in enumerate(stored.head(MAX_RUN_BUTTONS).iter_rows(named=True)):
            label = run_label(r["agent"], r["task_id"], r["run_status"], r["validator_outcome"])
            if cols[k % len(cols)].button(md(label), key=f"open_run_{r['run_id']}", width="stretch"):
                request_scroll("run")
                go("drill", taxonomy=ctx.taxonomy_id, failure_type=failure_type, insight=insight_id, run=r["run_id"])
        if stored.height > MAX_RUN_BUTTONS:
            st.caption(f"The first {MAX_RUN_BUTTONS} of {stored.height} runs; every source is listed below.")
    _records(ctx, insight_id)
    editing.insight_label(ctx, insight_id, info["text"])
    with st.expander(f"Where it was stated ({counted(sources.height, 'source row')})"):
        _sources_table(sources)


def _sources_table(sources: pl.DataFrame) -> None:
    """The insight's source rows, one column per thing a reader looks for (the 16 stored fields made a table twice
    the page's width, issue 42): run, task, agent, model, outcome, where it was stated and label; columns every
    row leaves empty are left out, and the texts wrap. Each row's detail (a JSON record) follows, whole."""
    where = pl.concat_str([pl.col("extractor"), pl.lit(": "), pl.col("source_field")], ignore_nulls=True)
    shown = sources.select(
        pl.col("run_id").alias("run"), pl.col("task_id").alias("task"), "agent", "model", "benchmark",
        pl.coalesce("validator_outcome", "run_status").alias("outcome"),
        pl.when(pl.col("source_file").is_not_null())
        .then(pl.concat_str([where, pl.lit(" ("), pl.col("source_file"), pl.lit(":"),
                             pl.col("source_line").cast(pl.Utf8).fill_null("?"), pl.lit(")")]))
        .otherwise(where).alias("stated in"),
        pl.col("label").cast(pl.Utf8))
    shown = shown.select(c for c in shown.columns if shown[c].null_count() < shown.height)
    if "benchmark" in shown.columns and shown["benchmark"].n_unique() == 1:  # said once, not in every row
        st.caption(f"Benchmark {code(shown['benchmark'][0])}.")
        shown = shown.drop("benchmark")
    texts, row_height = fit_text_columns(shown.with_columns(pl.all().fill_null("")), {c: c for c in shown.columns},
                                         fixed=40)  # inside an expander: its padding
    st.dataframe(shown, hide_index=True, width="stretch", row_height=row_height, column_config=texts)
    for k, (run_id, detail) in enumerate(zip(sources["run_id"], sources["detail"], strict=True)):
        if detail:
            st.caption(f"Detail of source row {k + 1}" + (f" (run {code(run_id)})" if run_id else "") + ":")
            st.code(str(detail), language="json", wrap_lines=True)


def render(ctx: Context) -> None:
    run_id = param("run")
    if run_id:
        # The run alone, so it is the view, not a section far above or below the list it was opened from.
        back = "the insight" if param("insight") else ("the failure type" if param("failure_type") else "the list")
        if st.button(f"← back to {back}", key="drill_back"):
            request_scroll("insight")
            go("drill", taxonomy=ctx.taxonomy_id, failure_type=param("failure_type"), insight=param("insight"),
               entry=param("entry"))
        if ctx.status.has("runs"):
            render_run(ctx, run_id)
        else:
            st.warning(f"No run {code(run_id)}: the store holds no runs.")
        return
    st.header("Drill-down")
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    _entry_points(ctx)
    _search(ctx)
    st.divider()
    _type_and_insights(ctx)

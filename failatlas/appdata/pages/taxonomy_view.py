"""Taxonomy: per phase, categories and failure types with prevalence bars, counts and intervals, as share of
insights or share of runs, filtered by agent, model, benchmark or paper; exports and a link into the drill-down.
Every number is a row of `taxonomy.prevalence`, the query every export reads. Types can be renamed, merged or split
here (`pages/editing.py`: recorded edits, written through `failatlas.appdata.actions`)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from failatlas.appdata import queries
from failatlas.appdata.pages import editing
from failatlas.appdata.pages.common import (
    Context,
    code,
    fit_text_columns,
    go,
    keep,
    link,
    md,
    param,
    show_next_steps,
    with_intervals,
)
from failatlas.core.errors import InputError
from failatlas.core.tables import counted
from failatlas.taxonomy.tables import COUNT_HEADERS, unit_count

UNITS = {"share of insights": "insights", "share of runs": "runs", "share of tasks": "tasks"}
DIMENSIONS = ["(none)", "agent", "model", "benchmark", "paper"]


def _pick(options: list[str], wanted: str | None, default: int = 0) -> int:
    return options.index(wanted) if wanted in options else default


def _controls(ctx: Context) -> tuple[str, str | None, str | None]:
    """Unit and filter, read from and written to the URL (`unit`, `by`, `value`), so a view can be shared."""
    cols = st.columns([3, 2, 3])
    units = list(UNITS)
    by_unit = {v: k for k, v in UNITS.items()}
    unit = UNITS[cols[0].radio("Prevalence as", units, horizontal=True, key="tx_unit",
                               index=_pick(units, by_unit.get(param("unit") or "")))]
    dimension = cols[1].selectbox("Filter by", DIMENSIONS, key="tx_dim", index=_pick(DIMENSIONS, param("by")))
    value = None
    if dimension != "(none)":
        options = ctx.q("filter_options").get(dimension, [])
        if not options:
            cols[2].caption(f"No insight names a {dimension}.")
            dimension = "(none)"
        else:
            value = cols[2].selectbox(dimension.capitalize(), options, key=f"tx_value_{dimension}",
                                      index=_pick(options, param("value")))
    keep(unit=None if unit == "insights" else unit, by=None if dimension == "(none)" else dimension, value=value)
    return unit, (None if dimension == "(none)" else dimension), value


def _exports(ctx: Context, view: pl.DataFrame | None, view_name: str, unit: str = "insights") -> None:
    with st.expander("Export: this view, or the whole taxonomy as `failatlas taxonomy export` writes it"):
        mime = {".csv": "text/csv", ".md": "text/markdown", ".tex": "application/x-tex", ".png": "image/png",
                ".pdf": "application/pdf"}
        if view is not None and view.height and st.checkbox(
                f"Prepare this view's files ({md(view_name)}: the rows shown, as the paper table and its figure)",
                key="tx_export_view"):
            files = queries.view_files(view, view_name, unit)
            cols = st.columns(len(files))
            for col, (name, data) in zip(cols, sorted(files.items()), strict=True):
                col.download_button(name, data, file_name=name, mime=mime.get(name[name.rfind("."):], "text/plain"),
                                    key=f"dl_view_{name}")
        st.markdown("**The whole taxonomy**")
        if not st.checkbox("Prepare the export files", key="tx_export"):
            return
        files = ctx.q("export_files", ctx.taxonomy_id)
        cols = st.columns(len(files))
        for col, (name, data) in zip(cols, sorted(files.items()), strict=True):
            col.download_button(name, data, file_name=name, mime=mime.get(name[name.rfind("."):], "text/plain"),
                                key=f"dl_{name}")


def _entry_points(ctx: Context) -> None:
    cols = st.columns([1, 2, 2])
    cols[0].markdown("**Start from**")
    for col, name in zip(cols[1:], queries.ENTRY_POINTS, strict=True):
        if col.button(name.capitalize(), key=f"tx_entry_{name}", width="stretch"):
            go("drill", taxonomy=ctx.taxonomy_id, entry=name)


def render(ctx: Context) -> None:
    st.header("Taxonomy")
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    _entry_points(ctx)
    unit, dimension, value = _controls(ctx)
    if dimension == "paper" and unit != "insights":
        st.warning(f"With a paper filter the page shows the share of insights: the share of {unit} is not broken "
                   "down by paper.")
        unit = "insights"
    try:
        frame = ctx.q("prevalence_frame", ctx.taxonomy_id, unit=unit, dimension=dimension, value=value)
    except InputError as exc:
        if unit == "insights":
            st.warning(md(exc.one_line()))
        else:  # the stage's hint names CLI flags; say it in this page's terms
            st.info(f"No insight of this taxonomy names the {unit[:-1]} it came from (imported traces often do "
                    f"not), so there is no share of {unit} to show. Choose “share of insights” above, or import "
                    f"the insights with their {unit[:-1]} ids.")
        return
    if dimension == "paper":
        st.caption("Paper filter: counts and shares of insight occurrences, without intervals.")
    if frame.height == 0:
        st.info("No insight of this taxonomy matches the filter.")
        _exports(ctx, None, "")
        return
    what = "insight occurrences of the phase" if unit == "insights" else unit
    method = "Wilson score interval" + (" (none where a phase has one type: it holds 100% by construction)"
                                        if unit == "insights" else "")
    st.caption(f"Share of {what} per failure type, 95% {method}; “{COUNT_HEADERS[unit]}” counts "
               + ("statements of the type's insights (one per run or trace that stated it); “distinct insights”, "
                  "their different texts" if unit == "insights" else
                  f"the {unit} with at least one occurrence of the type")
               + f"; taxonomy {code(ctx.taxonomy_id)}" + (f"; {dimension} = {code(value)}" if dimension else "") + ".")
    sizes = ctx.q("type_counts", ctx.taxonomy_id, dimension, value).select(
        "failure_type_id", pl.col("insights").alias("distinct_insights"), "occurrences")
    frame = with_intervals(frame).with_columns(
        pl.struct("failure_type_id").map_elements(
            lambda r: link("drill", taxonomy=ctx.taxonomy_id, failure_type=r["failure_type_id"]),
            return_dtype=pl.Utf8).alias("drill"))
    categories = (ctx.q("taxonomy_types", ctx.taxonomy_id).group_by("phase", "category_id", "category")
                  .agg(pl.len().alias("n")).sort("phase", "category_id"))
    for phase in dict.fromkeys(frame["phase"].to_list()):
        part = frame.filter(pl.col("phase") == phase)
        total = part["total"][0]
        n_types = part.filter(pl.col("failure_type_id") != "unassigned").height
        st.subheader(f"{md(phase.capitalize())} · {counted(n_types, 'type')} · "
                     f"total {unit_count(total, unit)}")
        cats = categories.filter((pl.col("phase") == phase) & pl.col("category").is_not_null())
        if cats.height:
            st.caption("Categories: " + "; ".join(f"**{md(r['category'])}** ({r['n']} type{'s' if r['n'] > 1 else ''})"
                                                   for r in cats.iter_rows(named=True)))
        if part.height == 1 and part["ci_low"].is_null().all():  # `prevalence`'s rule, as every export prints it
            st.caption("One failure type in this phase: it holds 100% of the phase's insight occurrences by "
                       "construction, so no interval.")
        part = part.join(sizes, on="failure_type_id", how="left")
        extra = ["distinct_insights"] + (["occurrences"] if unit != "insights" else [])
        shown = part.select(pl.col("category").fill_null("–"), "failure_type", (100 * pl.col("share")).alias("share"),
                            "count", "95% CI (%)", *extra, "failure_type_id", "drill")
        # the numbers' pixel widths fixed; category and type as wide as their names, wrapped where they do not fit
        names, row_height = fit_text_columns(shown, {"category": "category", "failure_type": "failure type"},
                                             fixed=110 + 115 + 95 + 110 + 75 + (90 if unit != "insights" else 0))
        st.dataframe(
            shown, hide_index=True, width="stretch", key=f"tx_table_{phase}", row_height=row_height,
            column_order=["category", "failure_type", "share", "count", "95% CI (%)", *extra, "drill"],
            column_config={
                **names,
                "count": st.column_config.NumberColumn(COUNT_HEADERS[unit], width=115),
                "95% CI (%)": st.column_config.TextColumn("95% CI (%)", width=95),
                "distinct_insights": st.column_config.NumberColumn("distinct insights", width=110),
                "occurrences": st.column_config.NumberColumn("occurrences", width=90),
                "share": st.column_config.ProgressColumn("prevalence (%)", format="%.1f%%", min_value=0.0,
                                                         max_value=100.0, width=110),
                "drill": st.column_config.LinkColumn("drill-down", display_text="open", width=75),
            })
    types = frame.filter(pl.col("failure_type_id") != "unassigned")
    if types.height:
        labels = {r["failure_type_id"]: f"{r['phase']} · {r['failure_type']} ({r['failure_type_id']})"
                  for r in types.iter_rows(named=True)}
        cols = st.columns([4, 1])
        chosen = cols[0].selectbox("Drill into a failure type", list(labels), format_func=labels.get,
                                   key="tx_drill_type")
        if cols[1].button("Open", key="tx_drill_open"):
            go("drill", taxonomy=ctx.taxonomy_id, failure_type=chosen)
    editing.taxonomy_edits(ctx)
    view_name = f"{unit}" + (f", {dimension} {value}" if dimension else "")
    _exports(ctx, frame.drop("drill", "95% CI (%)"), view_name, unit)

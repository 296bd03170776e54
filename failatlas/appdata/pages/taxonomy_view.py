"""Taxonomy: per phase, categories and failure types with prevalence bars, counts and intervals, as share of
insights or share of runs, filtered by agent, model, benchmark or paper; exports and a link into the drill-down.
Every number is a row of `taxonomy.prevalence`, the query every export reads."""

from __future__ import annotations

import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, code, go, link, md, show_next_steps, with_intervals
from failatlas.core.errors import InputError

UNITS = {"share of insights": "insights", "share of runs": "runs"}


def _controls(ctx: Context) -> tuple[str, str | None, str | None]:
    cols = st.columns([2, 2, 3])
    unit = UNITS[cols[0].radio("Prevalence as", list(UNITS), horizontal=True, key="tx_unit")]
    dimension = cols[1].selectbox("Filter by", ["(none)", "agent", "model", "benchmark", "paper"], key="tx_dim")
    value = None
    if dimension != "(none)":
        options = ctx.q("filter_options").get(dimension, [])
        if not options:
            cols[2].caption(f"No insight names a {dimension}.")
            dimension = "(none)"
        else:
            value = cols[2].selectbox(dimension.capitalize(), options, key=f"tx_value_{dimension}")
    return unit, (None if dimension == "(none)" else dimension), value


def _exports(ctx: Context) -> None:
    with st.expander("Export (the same tables as `failatlas taxonomy export`)"):
        if not st.checkbox("Prepare the export files", key="tx_export"):
            return
        files = ctx.q("export_files", ctx.taxonomy_id)
        mime = {".csv": "text/csv", ".md": "text/markdown", ".tex": "application/x-tex"}
        cols = st.columns(len(files))
        for col, (name, data) in zip(cols, sorted(files.items()), strict=True):
            col.download_button(name, data, file_name=name, mime=mime.get(name[name.rfind("."):], "text/plain"),
                                key=f"dl_{name}")


def render(ctx: Context) -> None:
    st.header("Taxonomy")
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    unit, dimension, value = _controls(ctx)
    if dimension == "paper" and unit == "runs":
        st.warning("A paper filter shows the share of insights only (`taxonomy.prevalence` has no paper "
                   "breakdown of runs).")
        unit = "insights"
    try:
        frame = ctx.q("prevalence_frame", ctx.taxonomy_id, unit=unit, dimension=dimension, value=value)
    except InputError as exc:
        st.warning(md(exc.one_line()))
        return
    if dimension == "paper":
        st.caption("Paper filter: counts and shares of insight occurrences, without intervals.")
    if frame.height == 0:
        st.info("No insight of this taxonomy matches the filter.")
        _exports(ctx)
        return
    what = "insight occurrences of the phase" if unit == "insights" else "runs"
    st.caption(f"Share of {what} per failure type, 95% bootstrap interval; taxonomy {code(ctx.taxonomy_id)}"
               + (f"; {dimension} = {code(value)}" if dimension else "") + ".")
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
        st.subheader(f"{md(phase.capitalize())} · {n_types} type(s) · total {total:,}")
        cats = categories.filter(pl.col("phase") == phase)
        if cats.height:
            st.caption("Categories: " + "; ".join(f"**{md(r['category'])}** ({r['n']} type{'s' if r['n'] > 1 else ''})"
                                                   for r in cats.iter_rows(named=True)))
        st.dataframe(
            part.select("category", "failure_type", "share", "count", "95% CI (%)", "failure_type_id", "drill"),
            hide_index=True, width="stretch", key=f"tx_table_{phase}",
            column_config={
                "failure_type": "failure type", "failure_type_id": "id",
                "share": st.column_config.ProgressColumn("prevalence", format="percent", min_value=0.0,
                                                         max_value=1.0),
                "drill": st.column_config.LinkColumn("drill-down", display_text="open"),
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
    _exports(ctx)

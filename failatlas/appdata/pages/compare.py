"""Compare: two agents (or models, benchmarks) side by side on the same taxonomy, from `taxonomy.prevalence`."""

from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, md, show_next_steps, with_intervals
from failatlas.core.errors import InputError

UNITS = {"share of insights": "insights", "share of runs": "runs"}


def render(ctx: Context) -> None:
    st.header("Compare")
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    cols = st.columns(4)
    by = cols[0].selectbox("Compare", ["agent", "model", "benchmark"], key="cmp_by")
    options = ctx.q("filter_options").get(by, [])
    if len(options) < 2:
        st.info(f"The insights name fewer than two of {by}; nothing to compare.")
        return
    left = cols[1].selectbox("Left", options, index=0, key=f"cmp_left_{by}")
    right = cols[2].selectbox("Right", options, index=1, key=f"cmp_right_{by}")
    unit = UNITS[cols[3].radio("Prevalence as", list(UNITS), key="cmp_unit")]
    try:
        frame = ctx.q("compare_frame", ctx.taxonomy_id, by=by, left=left, right=right, unit=unit)
    except InputError as exc:
        st.warning(md(exc.one_line()))
        return
    frame = with_intervals(with_intervals(frame, "left_"), "right_")
    bars = st.column_config.ProgressColumn
    for phase in dict.fromkeys(frame["phase"].to_list()):
        part = frame.filter(pl.col("phase") == phase)
        st.subheader(md(phase.capitalize()))
        st.dataframe(
            part.select("category", "failure_type", "left_share", "left_count", "left_95% CI (%)", "right_share",
                        "right_count", "right_95% CI (%)", "difference"),
            hide_index=True, width="stretch", key=f"cmp_table_{phase}",
            column_config={
                "left_share": bars(left, format="percent", min_value=0.0, max_value=1.0),
                "right_share": bars(right, format="percent", min_value=0.0, max_value=1.0),
                "left_95% CI (%)": f"{left} 95% CI (%)", "right_95% CI (%)": f"{right} 95% CI (%)",
                "left_count": f"{left} n", "right_count": f"{right} n",
                "difference": st.column_config.NumberColumn("difference", format="%+.3f"),
            })
        long = pl.concat([
            part.select("failure_type", pl.col("left_share").alias("share"), pl.lit(left).alias("side")),
            part.select("failure_type", pl.col("right_share").alias("share"), pl.lit(right).alias("side")),
        ]).fill_null(0.0)
        chart = alt.Chart(long.to_pandas()).mark_bar().encode(
            y=alt.Y("failure_type:N", title=None, sort="-x"), x=alt.X("share:Q", title="share"),
            color="side:N", yOffset="side:N", tooltip=["side", "failure_type", alt.Tooltip("share:Q", format=".3f")])
        st.altair_chart(chart, width="stretch")

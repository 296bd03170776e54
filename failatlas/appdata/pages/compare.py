"""Compare: two agents (or models, benchmarks) side by side on the same taxonomy, from `taxonomy.prevalence`."""

from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, keep, md, param, show_next_steps, with_intervals
from failatlas.core.errors import InputError

UNITS = {"share of insights": "insights", "share of runs": "runs", "share of tasks": "tasks"}


def render(ctx: Context) -> None:
    st.header("Compare")
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    cols = st.columns(4)
    dims = ["agent", "model", "benchmark"]
    by = cols[0].selectbox("Compare", dims, key="cmp_by", index=dims.index(param("by")) if param("by") in dims else 0)
    options = ctx.q("filter_options").get(by, [])
    if len(options) < 2:
        st.info(f"The insights name fewer than two of {by}; nothing to compare.")
        return
    left = cols[1].selectbox("Left", options, key=f"cmp_left_{by}",
                             index=options.index(param("left")) if param("left") in options else 0)
    right = cols[2].selectbox("Right", options, key=f"cmp_right_{by}",
                              index=options.index(param("right")) if param("right") in options else 1)
    units = list(UNITS)
    by_unit = {v: k for k, v in UNITS.items()}
    unit = UNITS[cols[3].radio("Prevalence as", units, key="cmp_unit",
                               index=units.index(by_unit.get(param("unit") or "", units[0])))]
    keep(by=by, left=left, right=right, unit=None if unit == "insights" else unit)
    try:
        frame = ctx.q("compare_frame", ctx.taxonomy_id, by=by, left=left, right=right, unit=unit)
    except InputError:
        st.info(f"No insight names the {unit[:-1]} it came from, so there is no share of {unit} to compare. Choose "
                "“share of insights”.")
        return
    frame = with_intervals(with_intervals(frame, "left_"), "right_").with_columns(
        pl.col("left_count").fill_null(0), pl.col("right_count").fill_null(0))
    bars = st.column_config.ProgressColumn
    # one x scale for every phase, so bars of two phases compare by length
    top = max(100 * float(frame.select(pl.max_horizontal("left_ci_high", "right_ci_high",
                                                         "left_share", "right_share").max()).item() or 0), 1.0)
    for phase in dict.fromkeys(frame["phase"].to_list()):
        part = frame.filter(pl.col("phase") == phase)
        st.subheader(md(phase.capitalize()))
        st.dataframe(
            part.select(pl.col("category").fill_null("–"), "failure_type", pl.col("left_share") * 100, "left_count",
                        "left_95% CI (%)", pl.col("right_share") * 100, "right_count", "right_95% CI (%)",
                        pl.col("difference") * 100),
            hide_index=True, width="stretch", key=f"cmp_table_{phase}",
            column_config={
                "left_share": bars(f"{left} (%)", format="%.1f%%", min_value=0.0, max_value=100.0),
                "right_share": bars(f"{right} (%)", format="%.1f%%", min_value=0.0, max_value=100.0),
                "left_95% CI (%)": f"{left} 95% CI (%)", "right_95% CI (%)": f"{right} 95% CI (%)",
                "left_count": f"{left} n", "right_count": f"{right} n",
                "difference": st.column_config.NumberColumn("difference (points)", format="%+.1f"),
            })
        long = pl.concat([
            part.select("failure_type", *(pl.col(f"left_{c}").alias(c) for c in ("share", "ci_low", "ci_high")),
                        pl.lit(left).alias("side")),
            part.select("failure_type", *(pl.col(f"right_{c}").alias(c) for c in ("share", "ci_low", "ci_high")),
                        pl.lit(right).alias("side")),
        ]).with_columns((100 * pl.col(c).fill_null(0.0)).alias(c) for c in ("share", "ci_low", "ci_high"))
        y = alt.Y("failure_type:N", title=None, sort=part["failure_type"].to_list(), axis=alt.Axis(labelLimit=0))
        x_scale = alt.Scale(domain=[0, top])
        base = alt.Chart(long.to_pandas())
        chart = (base.mark_bar().encode(
                    y=y, x=alt.X("share:Q", title="share (%) with 95% CI", scale=x_scale), color="side:N",
                    yOffset="side:N",
                    tooltip=["side", "failure_type", alt.Tooltip("share:Q", format=".1f"),
                             alt.Tooltip("ci_low:Q", format=".1f"), alt.Tooltip("ci_high:Q", format=".1f")])
                 + base.mark_rule(color="#333333").encode(y=y, x=alt.X("ci_low:Q", scale=x_scale), x2="ci_high:Q",
                                                          yOffset="side:N"))
        st.altair_chart(chart.properties(height=max(80, 38 * part.height)), width="stretch")

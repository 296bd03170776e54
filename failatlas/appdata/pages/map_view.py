"""Map: the 2-D projection of a phase's insights (stored by `cluster`), coloured by failure type; hovering shows
the text, selecting a point opens it in the drill-down."""

from __future__ import annotations

from typing import Any

import altair as alt
import streamlit as st

from failatlas.appdata.pages.common import Context, go, show_next_steps


def selected_insight(event: Any, param: str = "pick") -> str | None:
    """The insight id of the first point of the chart's selection event, if any. Streamlit reports a Vega-Lite
    point selection as `event["selection"][<param name>]`: a list of the selected points' `fields`."""
    try:
        points = event["selection"][param]
    except (KeyError, TypeError):
        return None
    for point in points or []:
        if isinstance(point, dict) and point.get("insight_id"):
            return str(point["insight_id"])
    return None


def render(ctx: Context) -> None:
    st.header("Map")
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    phases = ctx.q("taxonomy_phases", ctx.taxonomy_id)
    if not phases:
        st.info("The taxonomy has no failure types yet.")
        return
    cols = st.columns([2, 2])
    phase = cols[0].selectbox("Phase", phases, key="map_phase")
    limit = cols[1].select_slider("Points at most", [1000, 2000, 5000, 10000, 20000], value=5000, key="map_limit")
    points, total = ctx.q("map_points", ctx.taxonomy_id, phase, limit=limit)
    if points.height == 0:
        st.info("No 2-D coordinates for this phase: the clustering stored none (`failatlas cluster run`).")
        return
    st.caption(f"{points.height:,} of {total:,} insights" + (" (a fixed sample)" if total > points.height else "")
               + ". Click a point to open it in the drill-down.")
    pick = alt.selection_point(fields=["insight_id"], name="pick", on="click")
    chart = (alt.Chart(points.to_pandas()).mark_circle(size=40, opacity=0.75)
             .encode(x=alt.X("x:Q", axis=None), y=alt.Y("y:Q", axis=None),
                     color=alt.Color("failure_type:N", legend=alt.Legend(title="failure type", orient="right")),
                     tooltip=["failure_type", "text", "insight_id"])
             .add_params(pick).properties(height=560))
    event = st.altair_chart(chart, width="stretch", on_select="rerun", key="map_chart")
    insight_id = selected_insight(event)
    if insight_id:
        row = points.filter(points["insight_id"] == insight_id)
        failure_type = row["failure_type_id"][0] if row.height else None
        go("drill", taxonomy=ctx.taxonomy_id, failure_type=failure_type, insight=insight_id)

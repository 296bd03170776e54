"""Map: the 2-D projection of a phase's insights (stored by `cluster`), coloured by failure type; hovering shows
the text, selecting a point opens it in the drill-down."""

from __future__ import annotations

from typing import Any

import altair as alt
import streamlit as st

from failatlas.appdata.pages.common import CHAR_PX, Context, go, keep, param, request_scroll, show_next_steps
from failatlas.core.tables import counted


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


def _spread(values) -> alt.Scale:  # noqa: ANN001 - a polars Series
    """The points' own range with a 5% margin: a scale from 0 would squeeze a projection far from the origin into a
    corner of the chart."""
    low, high = float(values.min()), float(values.max())
    margin = (high - low) * 0.05 or 1.0
    return alt.Scale(domain=[low - margin, high + margin], zero=False, nice=False)


COLOURS = {"type": ("failure_type", "failure type"), "label": ("human_label", "human label")}


def render(ctx: Context) -> None:
    st.header("Map")
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    phases = ctx.q("taxonomy_phases", ctx.taxonomy_id)
    if not phases:
        st.info("The taxonomy has no failure types yet.")
        return
    sizes = ctx.q("phase_sizes", ctx.taxonomy_id)
    largest = max(phases, key=lambda p: sizes.get(p, 0))  # open on the phase with the most points
    wanted = param("phase")
    cols = st.columns([2, 2, 2])
    phase = cols[0].selectbox("Phase", phases, index=phases.index(wanted if wanted in phases else largest),
                              format_func=lambda p: f"{p} ({counted(sizes.get(p, 0), 'distinct insight')})",
                              key="map_phase")
    colour = cols[1].radio("Colour by", list(COLOURS), format_func=lambda c: COLOURS[c][1], horizontal=True,
                           index=1 if param("colour") == "label" else 0, key="map_colour")
    limit = cols[2].select_slider("Points at most", [1000, 2000, 5000, 10000, 20000], value=5000, key="map_limit")
    keep(phase=None if phase == largest else phase, colour=None if colour == "type" else colour)
    points, total = ctx.q("map_points", ctx.taxonomy_id, phase, limit=limit)
    if points.height == 0:
        st.info("No 2-D coordinates for this phase: the clustering stored none (`failatlas cluster run`).")
        return
    field, title = COLOURS[colour]
    if colour == "label" and points["human_label"].n_unique() == 1 and points["human_label"][0] == "(no label)":
        st.caption("These insights carry no human label (labels come with imported annotations such as TRAIL's).")
    st.caption(f"{points.height:,} of {counted(total, 'distinct insight')}"
               + (" (a fixed sample)" if total > points.height else "")
               + ". Click a point to open it in the drill-down.")
    pick = alt.selection_point(fields=["insight_id"], name="pick", on="click")
    n_colours = points[field].n_unique()
    scheme = "tableau10" if n_colours <= 10 else "tableau20"
    # two legend columns only while two of the longest names fit the chart's width (about 1,000 px at 1440x900):
    # a longer name pushed the second column past the chart's edge, where it was cut (issue 42)
    longest = max((len(str(v)) for v in points[field].unique().to_list()), default=0)
    columns = 2 if longest * CHAR_PX <= 440 else 1
    chart = (alt.Chart(points.to_pandas()).mark_circle(size=55, opacity=0.9)
             .encode(x=alt.X("x:Q", axis=None, scale=_spread(points["x"])),
                     y=alt.Y("y:Q", axis=None, scale=_spread(points["y"])),
                     color=alt.Color(f"{field}:N", scale=alt.Scale(scheme=scheme),
                                     legend=alt.Legend(title=title, orient="bottom", columns=columns, labelLimit=0,
                                                       symbolLimit=0)),
                     tooltip=["failure_type", "human_label", "text", "insight_id"])
             .add_params(pick).properties(height=560))
    event = st.altair_chart(chart, width="stretch", on_select="rerun", key="map_chart")
    insight_id = selected_insight(event)
    if insight_id:
        row = points.filter(points["insight_id"] == insight_id)
        failure_type = row["failure_type_id"][0] if row.height else None
        request_scroll("insight")
        go("drill", taxonomy=ctx.taxonomy_id, failure_type=failure_type, insight=insight_id)

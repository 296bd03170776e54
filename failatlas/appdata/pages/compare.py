"""Compare: two agents (or models, benchmarks, papers, settings) side by side on the same taxonomy, from
`taxonomy.prevalence`: per failure type each side's share with its interval, and the difference of the two shares
with Newcombe's hybrid score interval. Every agent that ran is offered, the reference `gold` included; a value
asked for in the URL that the store does not hold is said, never replaced silently."""

from __future__ import annotations

import textwrap

import altair as alt
import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, code, interval, keep, md, param, show_next_steps
from failatlas.core.errors import InputError
from failatlas.taxonomy.tables import COUNT_HEADERS, UNIT_NOUNS, unit_count

UNITS = {"share of insights": "insights", "share of runs": "runs", "share of tasks": "tasks"}
DIMENSIONS = ["agent", "model", "benchmark"]
EXTRA_DIMENSIONS = ("paper", "setting")  # offered once the store names a paper (setting)
REFERENCE = "gold"
LABEL_WIDTH = 44  # characters per line of a failure type's name on the chart's axis


def _defaults(options: list[str], sizes: dict[str, int]) -> tuple[str, str]:
    """The pair Compare opens on: the value with the most data on the left and the reference agent (or the next
    largest) on the right."""
    ranked = sorted(options, key=lambda v: (-sizes.get(v, 0), v))
    left = next((v for v in ranked if v != REFERENCE), ranked[0])
    right = REFERENCE if REFERENCE in options and left != REFERENCE else next(v for v in ranked if v != left)
    return left, right


def _side(cols, label: str, key: str, options: list[str], wanted: str | None, default: str,  # noqa: ANN001
          by: str) -> str:
    if wanted is not None and wanted not in options:
        st.warning(f"{md(label)}: {md(by)} {code(wanted)} from the link is not in this store; showing "
                   f"{code(default)} instead. Choose another below.")
    chosen = wanted if wanted in options else default
    return cols.selectbox(label, options, index=options.index(chosen), key=key)


def _side_cell(share: float | None, low: float | None, high: float | None, count: int, total: int) -> str:
    """One side of a row: '50.0 [15.0–85.0] 2/4' (share %, its interval, k of n)."""
    if share is None:
        return f"– {count}/{total}"
    return f"{100 * share:.1f} [{interval(low, high)}] {count}/{total}"


def _points(d: float | None, low: float | None, high: float | None) -> str:
    if d is None:
        return "–"
    return f"{100 * d:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def _verdict(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "–"
    return "yes" if low > 0 or high < 0 else "no"


def _label(name: str) -> str:
    return "\n".join(textwrap.wrap(" ".join(name.split()), LABEL_WIDTH, break_long_words=True)) or "–"


def chart(part: pl.DataFrame, left: str, right: str, top: float) -> alt.LayerChart:
    """Grouped horizontal bars (one per side) with their 95% intervals; each type's name wraps onto lines of its
    own and each type gets the height its name needs, so no two labels share a line. Drawn as SVG, so every label
    is an element a browser test can measure."""
    labels = {r["failure_type_id"]: _label(r["failure_type"]) for r in part.iter_rows(named=True)}
    seen: dict[str, int] = {}
    for key, text in labels.items():  # two types of one name stay two rows
        seen[text] = seen.get(text, 0) + 1
        if seen[text] > 1:
            labels[key] = f"{text}\n({key})"
    long = pl.concat([
        part.select(pl.col("failure_type_id").replace_strict(labels).alias("type"),
                    *(pl.col(f"{side}_{c}").alias(c) for c in ("share", "ci_low", "ci_high", "count", "total")),
                    pl.lit(name).alias("side"))
        for side, name in (("left", left), ("right", right))
    ]).with_columns((100 * pl.col(c).fill_null(0.0)).alias(c) for c in ("share", "ci_low", "ci_high"))
    lines = max(text.count("\n") + 1 for text in labels.values())
    step = max(40, 14 * lines + 14)
    order = [labels[k] for k in part["failure_type_id"].to_list()]
    y = alt.Y("type:N", title=None, sort=order,
              axis=alt.Axis(labelLimit=0, labelExpr="split(datum.label, '\\n')", labelFontSize=12,
                            labelLineHeight=14, labelPadding=6))
    x = alt.X("share:Q", title="share (%) with 95% interval", scale=alt.Scale(domain=[0, top]))
    colour = alt.Color("side:N", sort=[left, right], title=None, legend=alt.Legend(orient="top", labelLimit=0))
    base = alt.Chart(long.to_pandas())
    bars = base.mark_bar(height={"band": 0.9}).encode(
        y=y, x=x, color=colour, yOffset=alt.YOffset("side:N", sort=[left, right]),
        tooltip=["side", "type", alt.Tooltip("share:Q", format=".1f"), alt.Tooltip("ci_low:Q", format=".1f"),
                 alt.Tooltip("ci_high:Q", format=".1f"), "count", "total"])
    rules = base.mark_rule(color="#333333").encode(
        y=y, x=alt.X("ci_low:Q", scale=alt.Scale(domain=[0, top])), x2="ci_high:Q",
        yOffset=alt.YOffset("side:N", sort=[left, right], bandPosition=0.5))
    # A height in pixels is what Streamlit fits the whole chart into, legend and axis included (Vega's autosize
    # "fit"): a chart of few types collapsed into a strip with its labels on top of each other. A step (pixels per
    # side of a type) sizes the plot by its rows instead.
    return (bars + rules).properties(height=alt.Step(step // 2), usermeta={"embedOptions": {"renderer": "svg"}})


def render(ctx: Context) -> None:
    st.header("Compare")
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    cols = st.columns([2, 3, 3, 3])
    groups = ctx.q("compare_group_options")  # papers and settings, where the store names any
    dimensions = DIMENSIONS + [d for d in EXTRA_DIMENSIONS if d in groups]
    wanted_by = param("by")
    if wanted_by is not None and wanted_by not in dimensions:
        st.warning(f"Compare by {code(wanted_by)} is not available; comparing agents. Choose from "
                   f"{', '.join(dimensions)}.")
    by = cols[0].selectbox("Compare", dimensions, key="cmp_by",
                           index=dimensions.index(wanted_by) if wanted_by in dimensions else 0)
    options = {**ctx.q("compare_options"), **groups}.get(by, [])
    if len(options) < 2:
        st.info(f"The store names fewer than two of {md(by)}; nothing to compare.")
        return
    units = list(UNITS)
    by_unit = {v: k for k, v in UNITS.items()}
    # Share of runs by default where runs are stored: the reference agent's runs leave no insight, so only that
    # unit compares an agent with `gold`.
    default_unit = "runs" if ctx.status.has("runs") else "insights"
    unit = UNITS[cols[3].radio("Prevalence as", units, key="cmp_unit",
                               index=units.index(by_unit.get(param("unit") or default_unit, units[0])))]
    try:
        sizes = ctx.q("compare_totals", ctx.taxonomy_id, by=by, values=tuple(options), unit=unit)
    except InputError:
        st.info(f"No insight names the {unit[:-1]} it came from, so there is no share of {unit} to compare. Choose "
                "“share of insights”.")
        return
    default_left, default_right = _defaults(options, sizes)
    left = _side(cols[1], "Left", f"cmp_left_{by}", options, param("left"), default_left, by)
    right_default = default_right if default_right != left else next(v for v in options if v != left)
    right = _side(cols[2], "Right", f"cmp_right_{by}", options, param("right"), right_default, by)
    keep(by=by, left=left, right=right, unit=None if unit == default_unit else unit)
    if left == right:
        st.warning(f"Left and right are both {code(left)}: choose two different values.")
        return
    noun = UNIT_NOUNS[unit]
    for side in (left, right):
        if not sizes.get(side):
            st.info(f"{code(side)} has no {noun} in this taxonomy"
                    + (" (its runs left no failure insight), so its share of insights is undefined: compare the "
                       "share of runs instead." if unit == "insights" else "."))
    frame = ctx.q("compare_frame", ctx.taxonomy_id, by=by, left=left, right=right, unit=unit)
    st.caption(
        f"Per failure type: the share of each side's {noun}"
        + (" of the phase" if unit == "insights" else "") + f" ({md(left)}: {unit_count(sizes.get(left, 0), unit)}; "
        f"{md(right)}: {unit_count(sizes.get(right, 0), unit)} in all), in each side's column as "
        "share % [95% interval] k/n "
        f"({COUNT_HEADERS[unit]} of all), the interval by "
        + "Wilson's score method" + (" (none where a phase has one type)" if unit == "insights" else "")
        + f"; the difference {md(left)} − {md(right)} in percentage points with its 95% interval by Newcombe's "
        "hybrid score method (the difference of two independent proportions); “differs” says whether that "
        "interval excludes 0 (a two-sided test at the 5% level, one type at a time, not corrected for the "
        "number of types).")
    if frame.height == 0:
        st.info("Neither side has an insight in this taxonomy.")
        return
    top = max(100 * float(frame.select(pl.max_horizontal("left_ci_high", "right_ci_high", "left_share",
                                                         "right_share").max()).item() or 0), 1.0)
    for phase in dict.fromkeys(frame["phase"].to_list()):
        part = frame.filter(pl.col("phase") == phase)
        st.subheader(md(phase.capitalize()))
        table = pl.DataFrame({
            "failure type": part["failure_type"],
            "left": [_side_cell(*v) for v in part.select("left_share", "left_ci_low", "left_ci_high", "left_count",
                                                         "left_total").iter_rows()],
            "right": [_side_cell(*v) for v in part.select("right_share", "right_ci_low", "right_ci_high",
                                                          "right_count", "right_total").iter_rows()],
            "difference": [_points(*v) for v in part.select("difference", "difference_low",
                                                             "difference_high").iter_rows()],
            "differs": [_verdict(lo, hi) for lo, hi in part.select("difference_low", "difference_high").iter_rows()],
        })
        st.dataframe(table, hide_index=True, width="stretch", key=f"cmp_table_{phase}", column_config={
            # widths in pixels that add up to less than the page's 1440 px layout holds: no column is cut off
            "failure type": st.column_config.TextColumn("failure type", width=330),
            "left": st.column_config.TextColumn(left, width=175, help=f"{left}: share % [95% CI] k/n"),
            "right": st.column_config.TextColumn(right, width=175, help=f"{right}: share % [95% CI] k/n"),
            "difference": st.column_config.TextColumn("difference [95% CI]", width=170,
                                                      help="left − right, percentage points"),
            "differs": st.column_config.TextColumn("differs (5%)", width=80),
        })
        st.altair_chart(chart(part, left, right, top), width="stretch")


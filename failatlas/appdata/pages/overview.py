"""Overview: runs per benchmark, agent and model; phase and conjunctive scores with intervals; the funnel from
M to M·C·D·I·E; cost and time per run."""

from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, code, go, keep, link, md, paginate, param, show_next_steps
from failatlas.appdata.queries_groups import GROUPINGS, LABELS

SCORES = ("M", "D", "I", "E", "C", "I·E", "C·D", "All✓", "All·E✓", "M·C·D·I·E")
CHEAT = "cheat (twins)"  # the cheat rate on impossible twins, beside the phase scores (docs/metrics.md)
GROUP_COLUMNS = ("agent", "model", "benchmark", "paper_id", "setting", "kind", "n_masked")


def score_cells(summary: pl.DataFrame) -> pl.DataFrame:
    """Each score as 'mean [low–high] n', the runs scored on that metric last (it differs between metrics: a run
    whose judge did not run has no score there)."""
    from failatlas.bench_core.scoring.report import score_interval_text

    def cell(row: dict, metric: str) -> str:
        n = row.get(f"{metric}_n") or 0
        if not n:
            return "– n=0"
        return f"{row[metric]:.2f} [{score_interval_text(row, metric)}] n={n}"

    keys = [c for c in summary.columns if c in GROUP_COLUMNS]
    cheat = "cheat_n" in summary.columns and bool(summary["cheat_n"].sum())  # twin runs judged (cheat_report.py)
    rows = [{**{LABELS.get(k, k): _key(r[k]) for k in keys}, "runs": r["runs"], "tasks": r["tasks"],
             **{m: cell(r, m) for m in SCORES if m in summary.columns},
             **({CHEAT: cell(r, "cheat")} if cheat else {})} for r in summary.iter_rows(named=True)]
    return pl.DataFrame(rows)


def _key(value: object) -> str | None:
    """A group's value as text ('–' where the runs have none), so one column never mixes types."""
    return "–" if value is None or value == "" else str(value)


def funnel_table(funnel: pl.DataFrame) -> pl.DataFrame:
    """The funnel as agent x stage, each cell 'k/n' (runs passing of runs scored), or 'n/a' where none is scored."""
    stages = list(dict.fromkeys(funnel["stage"].to_list()))
    cells = funnel.with_columns(
        pl.when(pl.col("n_runs") > 0).then(pl.format("{}/{}", "n_pass", "n_runs")).otherwise(pl.lit("n/a"))
        .alias("cell"))
    wide = cells.pivot(on="stage", index="agent", values="cell", aggregate_function="first")
    return wide.select("agent", *stages)


def _imported(ctx: Context) -> None:
    """A store of imported traces (TRAIL, Inspect logs, JSONL): no run to score, but insights to explore."""
    held = ctx.q("imported_overview")
    counts = ctx.status.counts
    st.subheader("Imported failure insights")
    st.markdown(f"This store holds **{counts['insights']:,} insights** imported from files, and no benchmark run "
                "of its own: there are no scores or funnel to show here.")
    st.dataframe(held, hide_index=True, width="stretch", column_config={
        "human_labels": st.column_config.NumberColumn("human labels"), "traces": "traces (tasks or runs)"})
    if ctx.status.has("taxonomies"):
        st.markdown("Where to look:")
        for page, label, params in (
                ("taxonomy", "Taxonomy: the failure types mined from these insights and how common each is", {}),
                ("map", "Map: the insights in 2-D, coloured by the annotators' human labels", {"colour": "label"}),
                ("drill", "Drill-down: a type's insights and each one's source record (trace, label, evidence)", {})):
            if st.button(label, key=f"overview_go_{page}"):
                go(page, taxonomy=ctx.taxonomy_id, **params)
    else:
        show_next_steps(ctx, ("taxonomies",))


def _grouping(ctx: Context) -> str:
    """The score table's grouping: agent (with model) by default; paper, setting, task kind and n where the
    store's scored runs have them (`?group=` in the URL keeps the choice)."""
    options = ctx.q("grouping_options") or ["agent"]
    wanted = param("group")
    if wanted is not None and wanted not in options:
        st.warning(f"Group by {code(wanted)} is not available in this store; grouping by agent. Choose from "
                   f"{', '.join(options)}.")
    by = st.selectbox("Group the scores by", options, key="overview_group",
                      index=options.index(wanted) if wanted in options else 0,
                      help="; ".join(f"{name}: {', '.join(LABELS.get(k, k) for k in GROUPINGS[name])}"
                                     for name in options))
    keep(group=None if by == "agent" else by)
    return by


def render(ctx: Context) -> None:
    st.header("Overview")
    counts = ctx.status.counts
    st.caption(f"Store {code(ctx.path)} · " + " · ".join(
        f"{t}: {n:,}" for t, n in counts.items() if n >= 0))
    if not ctx.status.has("runs") and ctx.status.has("insights"):
        _imported(ctx)
        return
    if not show_next_steps(ctx, ("runs",)):
        return
    st.subheader("Runs per benchmark, agent and model")
    runs = ctx.q("runs_overview")
    if runs["benchmark"].n_unique() == 1:  # one benchmark: said once, not in every row
        st.caption(f"Benchmark {code(runs['benchmark'][0])}.")
        runs = runs.drop("benchmark")
    number = st.column_config.NumberColumn
    st.dataframe(runs, hide_index=True, width="stretch", key="overview_runs_summary", column_config={
        "agent_error": number("agent error"), "infra_error": number("infra error"),
        "cost_usd_total": number("cost ($)", format="%.4f"),
        "cost_usd_per_run": number("$ / run", format="%.4f"),
        "tokens_per_run": number("tokens / run", format="%.0f"),
        "duration_s_per_run": number("time / run (s)", format="%.1f"),
        "duration_s_median": number("median (s)", format="%.1f"),
    })
    twins = ctx.q("twin_run_count")
    if twins:
        st.caption(f"Runs of real tasks. The {twins:,} runs of impossible twins are counted only in the cheat rate "
                   "beside the scores below (docs/metrics.md).")
    with st.expander("Every run: time, cost, outcome (open one in the drill-down)"):
        _, total = ctx.q("runs_page", limit=1)
        limit, offset = paginate(total, "overview_runs_page")
        page, _ = ctx.q("runs_page", limit=limit, offset=offset)
        page = page.with_columns(pl.col("run_id").map_elements(lambda r: link("drill", run=r),
                                                                return_dtype=pl.Utf8).alias("open"))
        st.caption("outcome: the validator's verdict on a clean re-run; monitor: `flagged` when a monitor finding "
                   "failed the run (M = 0, e.g. it read the ground truth), `warned`, or `clean`.")
        shown = ["agent", *(["model"] if page["model"].drop_nulls().len() else []), "task_id",
                 *(["attempt"] if (page["attempt"] > 1).any() else []), "status", "outcome", "monitor",
                 "duration_s", "cost_usd", "tokens", "open"]  # the run's id and times are on its own view
        st.dataframe(page, hide_index=True, width="stretch", key="overview_runs", column_order=shown, column_config={
            "open": st.column_config.LinkColumn("drill-down", display_text="open"),
            "outcome": "validator", "monitor": "monitor",
            "duration_s": st.column_config.NumberColumn("time (s)", format="%.1f"),
            "cost_usd": st.column_config.NumberColumn("cost ($)", format="%.4f"),
        })
    if not ctx.status.has("validations") and not show_next_steps(ctx, ("judgements",)):
        return
    st.subheader("Phase and conjunctive scores")
    by = _grouping(ctx)
    st.caption("Mean, 95% Wilson interval (n: the tasks; a single task's runs), and the number of runs scored "
               "(docs/metrics.md); "
               f"grouped by {md(by)} as `failatlas bench report --by` groups them.")
    summary = ctx.q("score_groups", by)
    if summary.height:  # two tables, as in the paper export: every column readable without scrolling sideways
        cells = score_cells(summary)
        keys = [c for c in cells.columns if c not in (*SCORES, CHEAT)]
        cheat = [CHEAT] if CHEAT in cells.columns else []
        st.markdown("**Phase scores**: M monitor, D design, I implementation, E execution, C conclusion"
                    + (f"; **{CHEAT}**: the share of runs on impossible twins that cheated, in no score"
                       if cheat else ""))
        st.dataframe(cells.select(*keys, *(m for m in SCORES[:5] if m in cells.columns), *cheat), hide_index=True,
                     width="stretch")
        st.markdown("**Conjunctive scores**: a run passes when it passes every phase named")
        st.dataframe(cells.select(*keys, *(m for m in SCORES[5:] if m in cells.columns)), hide_index=True,
                     width="stretch")
    else:
        st.info("No run is scored yet: run `failatlas bench score`.")
    st.subheader("Funnel: M → M·C·D·I·E")
    funnel = ctx.q("funnel_frame")
    if funnel.height:
        chart = alt.Chart(funnel.to_pandas()).mark_bar().encode(
            x=alt.X("stage:N", sort=list(dict.fromkeys(funnel["stage"].to_list())), title=None,
                  axis=alt.Axis(labelAngle=0)),
            y=alt.Y("share:Q", scale=alt.Scale(domain=[0, 1]), title="share of runs"),
            color="agent:N", xOffset="agent:N",
            tooltip=["agent", "stage", "n_pass", "n_runs", alt.Tooltip("share:Q", format=".2f")],
        ).properties(height=280)
        st.altair_chart(chart, width="stretch")
        st.caption("Runs passing every phase up to the stage, of the runs scored on all of them (k/n).")
        st.dataframe(funnel_table(funnel), hide_index=True, width="stretch", key="overview_funnel")
    spend = ctx.q("llm_spend")
    if spend.height:
        st.subheader("LLM spend per role")
        st.dataframe(spend, hide_index=True, width="stretch")

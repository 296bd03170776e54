"""Runs: every run in one list, as Inspect's log viewer or a W&B table shows them, filtered and sorted by agent,
task, outcome, monitor verdict and each phase score (M, C, D, I, E and their product M·C·D·I·E), a page of 50 at
a time. Filters, order and page live in the URL (`?page=runs&agent=gold&E=0&sort=MCDIE&order=asc&p=2`); a click
on a row opens the run's view (`?page=drill&run=...`), and each row links to its task and to its diff against the
reference run."""

from __future__ import annotations

from urllib.parse import urlencode

import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, go, md, show_next_steps
from failatlas.appdata.queries_runs import (
    SCORE_KEYS,
    SCORE_VALUES,
    SCORES,
    SORTS,
    RunQuery,
    run_options,
    select_runs,
)
from failatlas.core.tables import counted

PAGE_SIZE = 50
SORT_LABELS = {"finished": "finished (newest first)", "agent": "agent", "task": "task", "outcome": "outcome",
               "monitor": "monitor verdict", **{k: f"score {v}" for k, v in SCORE_KEYS.items()},
               "time": "time", "cost": "cost"}
FILTERS = (("agent", "Agent", "agent"), ("task", "Task", "task"), ("outcome", "Outcome", "outcome"),
           ("monitor", "Monitor", "monitor"))
SCORE_CHIPS = {"1": "1", "0": "0", "none": "–"}  # SCORE_VALUES as the table prints them
URL_KEYS = ("agent", "task", "outcome", "monitor", *SCORE_KEYS, "sort", "order", "p")


def href(page: str, **params: str | list[str] | None) -> str:
    """A relative URL that opens `page` with these parameters (a list: the parameter repeated)."""
    return "?" + urlencode({"page": page, **{k: v for k, v in params.items() if v}}, doseq=True)


def score_text(value: int | None) -> str:
    return "–" if value is None else str(value)


def runs_grid(rows: pl.DataFrame, key: str, *, show_task: bool = True) -> str | None:
    """The runs as a table, one per row, with their scores ('–': not scored), their task linking to its view and
    a link to their diff against the reference run; returns the id of the run whose row was clicked (a click opens
    it)."""
    shown = rows.with_columns(
        *(pl.col(s).map_elements(score_text, return_dtype=pl.Utf8, skip_nulls=False) for s in SCORES),
        pl.col("monitor").fill_null("–"),
        pl.col("task_id").map_elements(lambda t: href("task", task=t), return_dtype=pl.Utf8).alias("task"),
        pl.col("run_id").map_elements(lambda r: href("diff", right=r), return_dtype=pl.Utf8).alias("diff"))
    columns = ["agent", *(["task"] if show_task else []), *(["attempt"] if (shown["attempt"] > 1).any() else []),
               "outcome", "monitor", *SCORES, "duration_s", "cost_usd", "diff"]
    event = st.dataframe(
        shown, hide_index=True, width="stretch", column_order=columns, on_select="rerun",
        selection_mode="single-row", key=key, column_config={
            # the task's id, linking to the task's view (the text shown is the id the URL ends with)
            "task": st.column_config.LinkColumn("task", display_text=r"task=(.*)$"),
            **{s: st.column_config.TextColumn(s, width=80 if len(s) > 1 else 40) for s in SCORES},
            "duration_s": st.column_config.NumberColumn("time (s)", format="%.1f", width=70),
            "cost_usd": st.column_config.NumberColumn("cost ($)", format="%.4f", width=70),
            "diff": st.column_config.LinkColumn("vs gold", display_text="diff", width=70),
        })
    picked = event.selection.rows if event is not None else []
    return shown["run_id"][picked[0]] if picked else None


def _multi(column, label: str, name: str, options: list[str], wanted: tuple[str, ...]) -> list[str]:  # noqa: ANN001
    missing = [v for v in wanted if v not in options]
    for value in missing:
        st.warning(f"{md(name)} {md(value)} from the link is not in this store; it is left out of the filter.")
    return column.multiselect(label, options, default=[v for v in wanted if v in options], key=f"runs_{name}",
                              placeholder="any")


def _query_from_widgets(table: pl.DataFrame, query: RunQuery) -> RunQuery:
    options = run_options(table)
    # Streamlit's multiselect keeps its chips on one line and squeezes them to their "×" in a narrow box (issue
    # 42: the E filter showed only "×"): agent and task get half the page each, outcome, monitor and the sort box
    # a row of their own, and the six scores a sixth each, their chips short ("1", "0", "–", as the table prints
    # scores)
    cols = [*st.columns(2), *st.columns([1, 1, 1, 0.6])]
    chosen = {name: _multi(col, label, name, options[key], getattr(query, f"{name}s"))
              for col, (name, label, key) in zip(cols, FILTERS, strict=False)}
    sort = cols[4].selectbox("Sort by", list(SORTS), index=list(SORTS).index(query.sort), key="runs_sort",
                             format_func=SORT_LABELS.get)
    descending = cols[5].radio("Order", ["desc", "asc"], index=0 if query.descending else 1, key="runs_order",
                               horizontal=True) == "desc"
    current = dict(query.scores)
    scores = []
    for col, (key, name) in zip(st.columns(len(SCORE_KEYS)), SCORE_KEYS.items(), strict=True):
        picked = col.multiselect(name, list(SCORE_VALUES), default=list(current.get(key, ())), key=f"runs_{key}",
                                 format_func=SCORE_CHIPS.get, placeholder="any",
                                 help="1 passed, 0 failed, – not scored")
        if picked:
            scores.append((key, tuple(v for v in SCORE_VALUES if v in picked)))
    return RunQuery(agents=tuple(chosen["agent"]), tasks=tuple(chosen["task"]), outcomes=tuple(chosen["outcome"]),
                    monitors=tuple(chosen["monitor"]), scores=tuple(scores), sort=sort, descending=descending)


def _keep(query: RunQuery, page: int) -> None:
    """Write the query and page into the URL (repeated parameters for several values), without a rerun."""
    wanted = {**query.to_params(), **({"p": [str(page)]} if page > 1 else {})}
    for name in URL_KEYS:
        if name in wanted:
            if st.query_params.get_all(name) != wanted[name]:
                st.query_params[name] = wanted[name]
        elif name in st.query_params:
            del st.query_params[name]


def render(ctx: Context) -> None:
    st.header("Runs")
    if not show_next_steps(ctx, ("runs",)):
        return
    table = ctx.q("run_table")
    query, problems = RunQuery.from_params(st.query_params.get_all)
    for problem in problems:
        st.warning(f"{md(problem)}: left out.")
    query = _query_from_widgets(table, query)
    rows = select_runs(table, query)
    pages = max(1, -(-rows.height // PAGE_SIZE))
    try:
        wanted = min(max(int(st.query_params.get("p") or 1), 1), pages)
    except ValueError:
        wanted = 1
    cols = st.columns([3, 1])
    cols[0].caption(
        f"{counted(rows.height, 'run')} of {table.height:,} match. outcome: the validator's verdict on a clean "
        "re-run, else the run's status; monitor: `flagged` (a finding failed the run, M = 0), `warned`, `clean`; "
        "scores 1 passed, 0 failed, – not scored (docs/metrics.md). Click a row to open the run."
        + (f" The {ctx.q('twin_run_count'):,} runs of impossible twins are not listed: they count only in the cheat "
           "rate (Overview; Overview's list of every run opens them)." if ctx.q("twin_run_count") else ""))
    page = wanted
    if pages > 1:
        page = int(cols[1].number_input(f"Page (of {pages})", min_value=1, max_value=pages, value=wanted,
                                        key=f"runs_page_{hash(query)}"))
    _keep(query, page)
    shown = rows.slice((page - 1) * PAGE_SIZE, PAGE_SIZE)
    if shown.height == 0:
        st.info("No run matches these filters.")
        return
    picked = runs_grid(shown, key=f"runs_grid_{hash(query)}_{page}")
    if picked:
        go("drill", run=picked)

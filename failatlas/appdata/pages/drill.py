"""Drill-down: failure type -> its insights -> one run (task, steps and tool calls, judges, diff, validator,
monitor). Reachable by query parameters (`?page=drill&failure_type=...&insight=...&run=...`), with two ready-made
entry points and a search over insight text."""

from __future__ import annotations

import json

import polars as pl
import streamlit as st

from failatlas.appdata import queries
from failatlas.appdata.pages.common import Context, code, go, md, paginate, param, show_next_steps

PAGE_SIZE = 50
MAX_RUN_BUTTONS = 20


def _entry_points(ctx: Context) -> None:
    cols = st.columns(len(queries.ENTRY_POINTS))
    for col, name in zip(cols, queries.ENTRY_POINTS, strict=True):
        if col.button(name.capitalize(), key=f"entry_{name}", width="stretch"):
            go("drill", taxonomy=ctx.taxonomy_id, entry=name)
    entry = param("entry")
    if entry not in queries.ENTRY_POINTS:
        return
    matches = ctx.q("entry_point_types", ctx.taxonomy_id, entry)
    st.markdown(f"**{entry.capitalize()}**: failure types whose name, definition or keywords match.")
    if matches.height == 0:
        st.info("No failure type of this taxonomy matches; search the insight text below instead.")
        return
    st.dataframe(matches.select("phase", "failure_type", "category", "n_insights", "hits", "definition",
                                "failure_type_id"), hide_index=True, width="stretch")
    for r in matches.head(5).iter_rows(named=True):
        if st.button(f"Open {md(r['phase'])} · {md(r['failure_type'])}", key=f"entry_open_{r['failure_type_id']}"):
            go("drill", taxonomy=ctx.taxonomy_id, failure_type=r["failure_type_id"], entry=entry)


def _search(ctx: Context) -> None:
    text = st.text_input("Search insight text", value=param("search") or "", key="drill_search")
    if not text.strip():
        return
    limit, offset = PAGE_SIZE, 0
    _, total = ctx.q("search_insights", text.strip(), ctx.taxonomy_id, limit=1)
    limit, offset = paginate(total, "drill_search_page", PAGE_SIZE)
    hits, total = ctx.q("search_insights", text.strip(), ctx.taxonomy_id, limit=limit, offset=offset)
    st.caption(f"{total:,} insight(s) contain “{md(text.strip())}”.")
    if hits.height == 0:
        return
    st.dataframe(hits, hide_index=True, width="stretch")
    labels = {r["insight_id"]: f"[{r['phase']}] {r['text'][:120]}" for r in hits.iter_rows(named=True)}
    cols = st.columns([4, 1])
    chosen = cols[0].selectbox("Open a found insight", list(labels), format_func=labels.get, key="drill_search_pick")
    if cols[1].button("Open insight", key="drill_search_open"):
        row = hits.filter(pl.col("insight_id") == chosen).row(0, named=True)
        go("drill", taxonomy=ctx.taxonomy_id, failure_type=row["failure_type_id"], insight=chosen, search=text)


def _type_and_insights(ctx: Context) -> None:
    types = ctx.q("taxonomy_types", ctx.taxonomy_id)
    options = [*types["failure_type_id"].to_list(), "unassigned"]
    labels = {r["failure_type_id"]: f"{r['phase']} · {r['failure_type']} ({r['failure_type_id']})"
              for r in types.iter_rows(named=True)} | {"unassigned": "Unassigned insights"}
    wanted = param("failure_type")
    index = options.index(wanted) if wanted in options else 0
    chosen = st.selectbox("Failure type", options, index=index, format_func=labels.get, key=f"drill_type_{wanted}")
    if chosen != wanted and wanted is not None:
        go("drill", taxonomy=ctx.taxonomy_id, failure_type=chosen)
    row = types.filter(pl.col("failure_type_id") == chosen)
    if row.height:
        r = row.row(0, named=True)
        st.markdown(f"**{md(r['failure_type'])}** · category *{md(r['category'])}* · {r['n_insights']:,} insights "
                    f"at build time")
        st.text(r["definition"])
    current = param("insight")
    if current and param("failure_type") is None:
        # An insight opened from the search or a link without its type (e.g. not in this taxonomy).
        _insight(ctx, current, None)
        st.divider()
    within = st.text_input("Filter this type's insights", key=f"drill_within_{chosen}")
    _, total = ctx.q("type_insights", ctx.taxonomy_id, chosen, search=within, limit=1)
    limit, offset = paginate(total, f"drill_type_page_{chosen}", PAGE_SIZE)
    page, total = ctx.q("type_insights", ctx.taxonomy_id, chosen, search=within, limit=limit, offset=offset)
    st.caption(f"{total:,} insight(s); most frequent first.")
    if page.height == 0:
        return
    st.dataframe(page, hide_index=True, width="stretch", key=f"drill_insights_{chosen}")
    labels = {r["insight_id"]: f"×{r['n_occurrences']} {r['text'][:140]}" for r in page.iter_rows(named=True)}
    ids = list(labels)
    insight_id = st.selectbox("Insight", ids, index=ids.index(current) if current in ids else 0,
                              format_func=labels.get, key=f"drill_insight_{chosen}_{offset}")
    _insight(ctx, insight_id, chosen)


def _insight(ctx: Context, insight_id: str, failure_type: str | None) -> None:
    info = ctx.q("insight_text", insight_id)
    if info is None:
        st.warning(f"No insight {code(insight_id)} in the store.")
        return
    st.text(info["text"])
    st.markdown(f"{code(insight_id)} · phase {md(info['phase'])} · stated {info['n_occurrences']}×")
    sources = ctx.q("insight_sources", insight_id)
    st.dataframe(sources, hide_index=True, width="stretch")
    runs = [r for r in dict.fromkeys(sources.filter(pl.col("run_stored"))["run_id"].to_list()) if r]
    if not runs:
        st.caption("No stored run behind this insight (imported from a file).")
        return
    cols = st.columns(min(len(runs), 4))
    for k, run_id in enumerate(runs[:MAX_RUN_BUTTONS]):
        if cols[k % len(cols)].button(f"Open run {md(run_id)}", key=f"open_run_{run_id}"):
            go("drill", taxonomy=ctx.taxonomy_id, failure_type=failure_type, insight=insight_id, run=run_id)


def _code(text: str | None, language: str | None = None) -> None:
    if text:
        st.code(text, language=language)
    else:
        st.caption("(empty)")


def render_run(ctx: Context, run_id: str) -> None:
    """Everything about one run, in tabs."""
    detail = ctx.q("run_detail", run_id)
    st.subheader(f"Run {code(run_id)}")
    if detail is None:
        st.warning(f"No run {code(run_id)} in the store.")
        return
    run = detail["run"]
    model = f" ({md(run['model'])})" if run["model"] else ""
    st.markdown(f"**{md(run['agent'])}**{model} · task {code(run['task_id'])} · {md(run['benchmark'])} · attempt "
                f"{run['attempt']} · status **{md(run['status'])}** · {run['duration_s']:.1f} s · "
                f"\\${run['cost_usd']:.4f} · {run['tokens']:,} tokens"
                + (f" · fault injected: {code(run['fault_injected'])}" if run.get("fault_injected") else ""))
    tabs = st.tabs(["Task", "Steps", "Judges", "Diff", "Validator", "Monitor", "Outputs"])
    with tabs[0]:
        task = detail["task"]
        if task is None:
            st.info(f"Task {code(run['task_id'])} is not in the catalog (`failatlas tasks import`).")
        else:
            st.markdown("**Question.**")
            st.text(task["question"])
            st.markdown("**Method.**")
            st.text(task["method"] or "–")
            st.markdown("**Ground truth.**")
            st.json(task["ground_truth"], expanded=True)
    with tabs[1]:
        steps = detail["steps"]
        st.caption(f"{steps.height} step(s) of the agent; {detail['commands'].height} sandbox command(s).")
        st.dataframe(steps, hide_index=True, width="stretch")
        tool_calls = steps.filter(pl.col("kind") == "tool_call")
        for r in tool_calls.head(50).iter_rows(named=True):
            with st.expander(f"\\#{r['seq']} {md(r['tool'])}"):
                _code(r["arguments"] if isinstance(r["arguments"], str) else json.dumps(r["arguments"]), "json")
        st.markdown("**Sandbox commands**")
        st.dataframe(detail["commands"], hide_index=True, width="stretch")
    with tabs[2]:
        judgements = detail["judgements"]
        if judgements.height == 0:
            st.info("No judge has scored this run yet (`failatlas bench score`).")
        for r in judgements.iter_rows(named=True):
            verdict = "passed" if r["passed"] else ("failed" if r["passed"] is not None else r["status"])
            score = "" if r["score"] is None else f" · score {r['score']:.2f}"
            st.markdown(f"**{md(r['phase'])}** · {code(r['judge'])} · {md(verdict)}{score}")
            if r["error_analysis"]:
                st.text(r["error_analysis"])
            if r["reason"]:
                st.caption(md(r["reason"]))
    with tabs[3]:
        if detail["outputs"].get("diff_truncated"):
            st.warning("The stored diff was truncated.")
        _code(detail["diff"], "diff")
    with tabs[4]:
        v = detail["validation"]
        if v is None:
            st.info("The validator has not run on this run yet (`failatlas bench score`).")
        else:
            st.markdown(f"Outcome **{code(v['outcome'])}** · exit code {v['exit_code']} · "
                        f"{(v['duration_s'] or 0):.1f} s")
            if v["detail"]:
                st.text(v["detail"])
            st.markdown("Command")
            _code(v["command"], "bash")
            st.markdown("stdout (tail)")
            _code(v["stdout_tail"])
            st.markdown("stderr (tail)")
            _code(v["stderr_tail"])
            if v["metrics"]:
                st.json(v["metrics"])
    with tabs[5]:
        findings = detail["findings"]
        if findings.height == 0:
            st.caption("No monitor finding.")
        for r in findings.iter_rows(named=True):
            st.markdown(f"**{md(r['severity'])}** · {code(r['rule'])} ({md(r['source'])})")
            _code(r["evidence"])
    with tabs[6]:
        outputs = {k: v for k, v in detail["outputs"].items() if k != "diff"}
        st.json(outputs, expanded=False)


def render(ctx: Context) -> None:
    st.header("Drill-down")
    run_id = param("run")
    if run_id and ctx.status.has("runs"):
        if st.button("← back to the failure type", key="drill_back"):
            go("drill", taxonomy=ctx.taxonomy_id, failure_type=param("failure_type"), insight=param("insight"))
        render_run(ctx, run_id)
        st.divider()
    if not show_next_steps(ctx, ("taxonomies",)):
        return
    _entry_points(ctx)
    _search(ctx)
    st.divider()
    _type_and_insights(ctx)

"""Task: one task and its runs across agents (`?page=task&task=<id>`): what the agent is asked (the prompt it
reads, and the task's metadata), then every run of it with its outcome, monitor verdict and phase scores; a click
on a run opens it, and a button opens the side-by-side diff of the reference run against another agent's."""

from __future__ import annotations

import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, code, go, keep, md, param, show_next_steps, url_key, wrote_url
from failatlas.appdata.pages.run_view import run_label
from failatlas.appdata.pages.runs import runs_grid
from failatlas.appdata.queries_runs import REFERENCE, RunQuery, default_pair, select_runs
from failatlas.bench_core.agent_order import sort_groups
from failatlas.core.tables import counted


def _choose_task(ctx: Context) -> str | None:
    tasks = ctx.q("task_list")
    ids = tasks["task_id"].to_list()
    wanted = param("task")
    if wanted and wanted not in ids:
        st.warning(f"Task {code(wanted)} from the link is not in this store.")
    facts = {r["task_id"]: r for r in tasks.iter_rows(named=True)}

    def label(task_id: str) -> str:
        r = facts[task_id]
        title = f" · {r['title']}" if r["title"] else ""
        return f"{task_id}{title} · {counted(r['runs'], 'run')}, {counted(r['agents'], 'agent')}"

    if not ids:
        st.info("No task in the catalog and no run: `failatlas tasks import-mini`, then `failatlas bench run`.")
        return None
    task_id = st.selectbox("Task", ids, index=ids.index(wanted) if wanted in ids else 0, format_func=label,
                           key=url_key("task_pick", wanted))
    keep(task=task_id)
    wrote_url("task_pick", task_id)
    return task_id


def _metadata(detail: dict) -> None:
    task = detail["task"]
    paper = task.get("paper") or {}
    repo = task.get("repository") or {}
    facts = [f"benchmark **{md(task['benchmark'])}**", f"kind {code(task['kind'])}"]
    if paper.get("id") or paper.get("title"):
        facts.append(f"paper {md(paper.get('title') or paper.get('id'))}")
    if repo.get("url"):
        facts.append(f"repository {code(repo['url'])}" + (f" at {code(repo['commit'][:12])}" if repo.get("commit")
                                                          else ""))
    resources = task.get("resources") or {}
    facts.append(f"{resources.get('gpus', 0)} GPU · network {code(resources.get('network', '?'))}")
    if task.get("settings"):
        facts.append(counted(len(task["settings"]), "setting"))
    st.markdown(" · ".join(facts))
    st.markdown("**Prompt** (what an agent reads, in the task's default setting):")
    st.code(detail["prompt"], language=None, wrap_lines=True)
    with st.expander("The task's metadata (what the agent may know)"):
        st.json(task, expanded=True)
    with st.expander("Ground truth (never shown to the agent)"):
        st.json(detail["ground_truth"], expanded=True)


def _diff_buttons(runs: pl.DataFrame, task_id: str) -> None:
    """One button per other agent: the reference run (or the task's first) against that agent's newest run."""
    left, _ = default_pair(runs, task_id)
    if left is None or runs.height < 2:
        st.caption("One run only: nothing to diff against.")
        return
    base = runs.filter(pl.col("run_id") == left).row(0, named=True)
    others = (runs.filter(pl.col("agent") != base["agent"]).sort(["finished_at", "run_id"], descending=[True, False])
              .unique("agent", keep="first", maintain_order=True))
    others = sort_groups(others, ["agent"])
    if base["agent"] != REFERENCE:
        st.caption(f"No {code(REFERENCE)} run of this task: diffs are against {md(base['agent'])}'s run.")
    st.markdown(f"**Side-by-side diff**: {md(base['agent'])}'s run against")
    cols = st.columns(min(4, max(1, others.height)))
    for k, r in enumerate(others.iter_rows(named=True)):
        text = run_label(r["agent"], r["task_id"], r["status"], r["validator"])
        if cols[k % len(cols)].button(md(text), key=f"task_diff_{r['run_id']}", width="stretch"):
            go("diff", left=left, right=r["run_id"])


def render(ctx: Context) -> None:
    st.header("Task")
    if not ctx.status.exists or not (ctx.status.has("tasks") or ctx.status.has("runs")):
        show_next_steps(ctx, ("runs",))
        return
    task_id = _choose_task(ctx)
    if task_id is None:
        return
    detail = ctx.q("task_detail", task_id)
    table = ctx.q("run_table") if ctx.status.has("runs") else None
    runs = select_runs(table, RunQuery(tasks=(task_id,), sort="agent", descending=False)) \
        if table is not None else None
    st.subheader("Runs", anchor="task-runs")
    if runs is None or runs.height == 0:
        st.info(f"No run of task {code(task_id)} yet: `failatlas bench run --task {task_id}`.")
    else:
        agents = runs["agent"].n_unique()
        st.caption(f"{counted(runs.height, 'run')} by {counted(agents, 'agent')}. outcome: the validator's verdict, "
                   "else the run's status; monitor: `flagged` (M = 0), `warned`, `clean`; scores 1 passed, 0 failed, "
                   "– not scored. Click a row to open the run.")
        picked = runs_grid(runs, key=f"task_runs_{task_id}", show_task=False)
        if picked:
            go("drill", run=picked)
        _diff_buttons(runs, task_id)
    st.subheader("The task", anchor="task")
    if detail is None:
        st.info(f"Task {code(task_id)} is not in the catalog (`failatlas tasks import`): only its runs are known.")
    else:
        _metadata(detail)

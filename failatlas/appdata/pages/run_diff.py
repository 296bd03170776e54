"""Run diff: two runs' diffs side by side (`?page=diff&left=<run>&right=<run>`), file by file, and below them the
diff of the two diffs. By default the left side is the reference agent's run of the right run's task (`gold`
restores the reference implementation, so the comparison shows what the agent did differently). The page says
when a run has no diff, when a run is not stored, and when the two runs are of different tasks."""

from __future__ import annotations

import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, code, go, keep, md, param, show_next_steps, url_key, wrote_url
from failatlas.appdata.pages.run_view import run_label
from failatlas.appdata.queries_runs import REFERENCE, diff_of_diffs, file_pairs, resolve_pair
from failatlas.core.tables import counted

SIDES = ("left", "right")


def _label(r: dict) -> str:
    attempt = f" · attempt {r['attempt']}" if r["attempt"] and r["attempt"] > 1 else ""
    return run_label(r["agent"], r["task_id"], r["status"], r["validator"]) + attempt


def _pick(table: pl.DataFrame) -> tuple[str | None, str | None]:
    """The two runs: the URL's, with the missing side filled in (the reference run of the other side's task on
    the left, another agent's run on the right); selectors to change them, written back to the URL."""
    wanted = {side: param(side) for side in SIDES}
    known = set(table["run_id"].to_list())
    for side, run_id in wanted.items():
        if run_id and run_id not in known:
            st.warning(f"No run {code(run_id)} in the store (the link's {side} side).")
            wanted[side] = None
    anchor = wanted["right"] or wanted["left"]
    tasks = sorted(table["task_id"].unique().to_list())
    task_of = dict(zip(table["run_id"].to_list(), table["task_id"].to_list(), strict=True))
    default_task = task_of[anchor] if anchor else next(
        (t for t in tasks if table.filter(pl.col("task_id") == t).height > 1), tasks[0])
    task_id = st.selectbox("Task", tasks, index=tasks.index(default_task), key=url_key("diff_task", default_task))
    wrote_url("diff_task", task_id)  # the pair written below is of this task: its anchor gives it back
    if anchor and task_id != default_task:  # another task chosen: start from its default pair
        wanted = {"left": None, "right": None}
    left, right = resolve_pair(table, task_id, wanted["left"], wanted["right"])
    options = table.filter(pl.col("task_id") == task_id).sort(["agent", "attempt", "run_id"])["run_id"].to_list()
    options += [r for r in (left, right) if r and r not in options]  # a run of another task, from the link
    labels = {r["run_id"]: _label(r) for r in table.filter(pl.col("run_id").is_in(options)).iter_rows(named=True)}
    cols = st.columns(2)
    chosen = []
    for col, side, default in zip(cols, SIDES, (left, right), strict=True):
        chosen.append(col.selectbox(f"{side.capitalize()} run", options, format_func=labels.get,
                                    index=options.index(default) if default in options else None,
                                    key=url_key(f"diff_{side}", (task_id, left, right)),
                                    placeholder="choose a run"))
    keep(left=chosen[0], right=chosen[1])
    for side in SIDES:  # resolve_pair gives the chosen pair back on the next run
        wrote_url(f"diff_{side}", (task_id, *chosen))
    return chosen[0], chosen[1]


def _side(col, side: str, r: dict) -> None:  # noqa: ANN001
    col.markdown(f"**{md(_label(r))}**  \nrun {code(r['run_id'])}")
    if col.button("open this run", key=f"diff_open_{side}"):
        go("drill", run=r["run_id"])
    if r["diff_truncated"]:
        col.warning("The stored diff was truncated.")


def render(ctx: Context) -> None:
    st.header("Run diff")
    if not show_next_steps(ctx, ("runs",)):
        return
    table = ctx.q("run_table")
    left, right = _pick(table)
    if not left or not right:
        st.info("Choose two runs.")
        return
    runs = ctx.q("run_diffs", (left, right))
    a, b = runs[left], runs[right]
    if left == right:
        st.warning("Both sides are the same run: choose another one.")
    if a["task_id"] != b["task_id"]:
        st.warning(f"The two runs are of different tasks (left: task {code(a['task_id'])}, right: task "
                   f"{code(b['task_id'])}): their diffs change different code, so they do not compare like for like.")
    if a["agent"] != REFERENCE and b["agent"] != REFERENCE:
        st.caption(f"Neither side is the reference agent {code(REFERENCE)}'s run.")
    cols = st.columns(2)
    for col, side, r in zip(cols, SIDES, (a, b), strict=True):
        _side(col, side, r)
        if not r["diff"].strip():
            col.info("This run has no diff: it changed no file of the repository." if r["status"] == "completed"
                     else f"This run has no diff: it stopped with status {code(r['status'])} before its changes "
                     "were collected.")
    pairs = file_pairs(a["diff"], b["diff"])
    if not pairs:
        return
    st.subheader("Files", anchor="files")
    summary = pl.DataFrame([{
        "file": path,
        "left": f"+{x.added} −{x.removed}" if x else "not changed",
        "right": f"+{y.added} −{y.removed}" if y else "not changed",
        "same change": "yes" if x and y and x.text == y.text else "no"} for path, x, y in pairs])
    st.caption(f"{counted(len(pairs), 'file')} changed by either run: lines added (+) and removed (−) on each side.")
    st.dataframe(summary, hide_index=True, width="stretch", key="diff_files")
    for path, x, y in pairs:
        st.markdown(f"**{code(path)}**" + (" · the same change on both sides" if x and y and x.text == y.text else ""))
        cols = st.columns(2)
        for col, part, r in zip(cols, (x, y), (a, b), strict=True):
            if part is None:
                col.caption(f"{md(r['agent'])}'s run does not change this file.")
            else:
                # two columns, each whole: long lines wrap, and neither side scrolls inside a box (a fixed height
                # for the longer side clipped it at 420 of 1017 px beside a whole left side, issue 42)
                col.code(part.text, language="diff", wrap_lines=True, height="content")
    st.subheader("Diff of the diffs", anchor="diff-of-diffs")
    st.caption("A unified diff from the left run's diff to the right run's: the lines only one of them holds.")
    both = diff_of_diffs(a["diff"], b["diff"], left_name=f"{a['agent']} ({left})", right_name=f"{b['agent']} ({right})")
    if both:
        st.code(both, language="diff", height=420 if both.count("\n") > 24 else "content")
    else:
        st.caption("The two diffs are identical.")

"""One run on its own view of the drill-down (`?page=drill&run=...`): what it was asked, how it was judged, the
validator's log, the diff, and the agent's steps with their full outputs, one section under the other so that
nothing hides behind a tab (each section's header carries an anchor: `#verdicts`, `#validator`, `#diff`, ...)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import streamlit as st

from failatlas.appdata.pages.common import Context, code, link, md, scroll_if_requested
from failatlas.appdata.queries_runs import REFERENCE
from failatlas.core.tables import counted

TEXT_CAP = 20_000  # characters of one step's content or one written file shown; the rest is cut and said so
STEPS_PER_PAGE = 100
# The run view's sections, in page order, with their header anchors: the links at the top of the run jump to them.
SECTIONS = (("judges", "verdicts"), ("evidence", "evidence"), ("validator", "validator"), ("diff", "diff"),
            ("steps", "steps"), ("sandbox commands", "commands"), ("task", "task"), ("monitor", "monitor"),
            ("outputs", "outputs"))


def outcome_of(status: str | None, outcome: str | None) -> str:
    """A run's outcome in a few words: the validator's verdict when it ran, else the run's status."""
    if outcome:
        return "validator passed" if outcome == "passed" else f"validator {outcome.replace('_', ' ')}"
    return (status or "not run").replace("_", " ")


def run_label(agent: str | None, task_id: str | None, status: str | None, outcome: str | None) -> str:
    """How a run is named on a button: agent, task and outcome, never its hash."""
    return f"{agent or 'unknown agent'} · task {task_id or '?'} · {outcome_of(status, outcome)}"


def run_links(run_id: str, task_id: str, gold_run: str | None) -> str:
    """Markdown links from a run to its task's page and to its diff against the task's gold run (`gold_run`; without
    one, the Run diff page puts another run of the task beside it). Values are URL-encoded by `link`."""
    diff = "diff against gold" if gold_run else "diff against another run (no other gold run of this task)"
    return (f"[task {code(task_id)}]({link('task', task=task_id)}) · "
            f"[{diff}]({link('diff', left=gold_run, right=run_id)})")


def _capped(text: str) -> tuple[str, bool]:
    return (text, False) if len(text) <= TEXT_CAP else (text[:TEXT_CAP], True)


def _code(text: str | None, language: str | None = None, height: int | str = "content") -> None:
    if not text:
        st.caption("(empty)")
        return
    shown, cut = _capped(text)
    st.code(shown, language=language, height=height)
    if cut:
        st.caption(f"Showing the first {TEXT_CAP:,} of {len(text):,} characters.")


def _arguments(value: Any) -> dict | str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return value if isinstance(value, dict) else json.dumps(value)


def _matches(needle: str, *values: Any) -> bool:
    return not needle or any(needle in str(v).lower() for v in values if v is not None)


def _step(r: dict) -> None:
    head = f"\\#{r['seq']} · {md(r['kind'])}" + (f" · {md(r['tool'])}" if r["tool"] else "") + (
        f" · {md(r['role'])}" if r["role"] else "")
    st.markdown(f"**{head}**")
    args = _arguments(r["arguments"]) if r["arguments"] is not None else None
    if isinstance(args, dict) and r["tool"] == "write_file":
        size = f" · {args['bytes']:,} characters" if isinstance(args.get("bytes"), int) else ""
        st.markdown(f"writes {code(args.get('path', '?'))}{size}")
        if "content" in args:
            _code(str(args["content"]))
            if args.get("content_truncated"):
                st.caption("The trace keeps the first 8,192 characters of a written file; the diff has the rest.")
        else:
            st.caption("This run's trace did not keep written contents (recorded before they were); see the diff.")
    elif isinstance(args, dict) and set(args) == {"command"}:
        _code(str(args["command"]), "bash")
    elif args is not None:
        _code(json.dumps(args, indent=2, ensure_ascii=False) if isinstance(args, dict) else str(args), "json")
    if r["content"]:
        _code(str(r["content"]))


def _steps(detail: dict, run_id: str) -> None:
    steps: pl.DataFrame = detail["steps"]
    commands: pl.DataFrame = detail["commands"]
    st.subheader("Steps", anchor="steps")
    needle = st.text_input("Search this run's steps, tool outputs and sandbox commands", key=f"run_search_{run_id}")
    needle = needle.strip().lower()
    rows = [r for r in steps.iter_rows(named=True)
            if _matches(needle, r["content"], r["arguments"], r["tool"], r["kind"])]
    st.caption(f"{len(rows):,} of {counted(steps.height, 'step')}" + (f" contain “{md(needle)}”" if needle else "")
               + ". Outputs are shown whole (tracebacks included) up to 20,000 characters each.")
    pages = max(1, -(-len(rows) // STEPS_PER_PAGE))
    page = 1
    if pages > 1:
        page = int(st.number_input(f"Page of steps (of {pages})", min_value=1, max_value=pages, value=1,
                                   key=f"run_steps_page_{run_id}_{needle}"))
    with st.container(height=640 if len(rows) > 4 else "content"):
        for r in rows[(page - 1) * STEPS_PER_PAGE: page * STEPS_PER_PAGE]:
            _step(r)
    st.subheader("Sandbox commands", anchor="commands")
    shown = [r for r in commands.iter_rows(named=True)
             if _matches(needle, r["command"], r["stdout_tail"], r["stderr_tail"])]
    if not shown:
        st.caption("No sandbox command" + (" matches." if needle else "."))
    for r in shown[:STEPS_PER_PAGE]:
        flags = " · timed out" if r["timed_out"] else ""
        flags += f" · killed ({md(r['killed_reason'])})" if r["killed_reason"] else ""
        flags += " · output cut" if r["output_truncated"] else ""
        with st.expander(f"{md(r['purpose'])} \\#{r['seq']} · exit {r['exit_code']}{flags} · {md(r['command'])[:120]}",
                         expanded=bool(r["exit_code"])):
            _code(r["command"], "bash")
            if r["stdout_tail"]:
                st.caption("stdout (tail)")
                _code(r["stdout_tail"])
            if r["stderr_tail"]:
                st.caption("stderr (tail)")
                _code(r["stderr_tail"])


def _verdicts(detail: dict) -> None:
    st.subheader("Judges", anchor="verdicts")
    judgements: pl.DataFrame = detail["judgements"]
    if judgements.height == 0:
        st.info("No judge has scored this run yet (`failatlas bench score`).")
    skipped = judgements.filter(pl.col("status") == "not_run")
    if skipped.height:  # one line for the judges that did not run (no endpoint), not one block each
        reasons = sorted(set(skipped["reason"].fill_null("").to_list()))
        st.caption(f"Not run: {', '.join(md(j) for j in skipped['judge'].to_list())}"
                   + (f" ({md(reasons[0])})" if len(reasons) == 1 and reasons[0] else ""))
    for r in judgements.filter(pl.col("status") != "not_run").iter_rows(named=True):
        verdict = "passed" if r["passed"] else ("failed" if r["passed"] is not None else r["status"])
        score = "" if r["score"] is None else f" · score {r['score']:.2f}"
        st.markdown(f"**{md(r['phase'])}** · {code(r['judge'])} · {md(verdict)}{score}{_read(r.get('evidence_ids'))}")
        if r["error_analysis"]:
            st.text(r["error_analysis"])
        if r["reason"]:
            st.caption(md(r["reason"]))


def _read(ids: Any) -> str:
    """' · read `a`, `b`': the evidence a verdict was decided on (nothing for a verdict stored without)."""
    found = json.loads(ids) if isinstance(ids, str) else ids
    return f" · read {', '.join(code(i) for i in found)}" if found else ""


def _evidence(detail: dict) -> None:
    st.subheader("Evidence", anchor="evidence")
    evidence: pl.DataFrame | None = detail.get("evidence")
    if evidence is None or evidence.height == 0:
        st.caption("No evidence recorded: the run is not scored, or was scored before evidence was stored "
                   "(`failatlas bench score --rescore`).")
        return
    st.caption("What the harness built before judging: each verdict above names the ids it read.")
    for r in evidence.iter_rows(named=True):
        ran = "the agent's code ran there" if r["agent_code_ran"] else "no agent code ran there"
        blame = f" · blame {md(r['blame'])}" if r["blame"] else ""
        with st.expander(f"{r['id']} · {r['kind']} · {r['status']} · {ran}{blame}"):
            if r["tree"]:
                st.caption(f"tree {code(r['tree'][:16])}")
            st.json(_arguments(r["observed"]) if r["observed"] else {}, expanded=True)
            notes = json.loads(r["notes"]) if r["notes"] else []
            for note in notes:
                st.caption(md(str(note)))


def _validator(detail: dict) -> None:
    st.subheader("Validator", anchor="validator")
    v = detail["validation"]
    if v is None:
        st.info("The validator has not run on this run yet (`failatlas bench score`).")
        return
    st.markdown(f"Outcome **{code(v['outcome'])}** · exit code {v['exit_code']} · {(v['duration_s'] or 0):.1f} s"
                + _read(v.get("evidence_ids")))
    if v["detail"]:
        st.text(v["detail"])
    st.caption("Command")
    _code(v["command"], "bash")
    st.caption("stdout (tail)")
    _code(v["stdout_tail"], height=260 if (v["stdout_tail"] or "").count("\n") > 14 else "content")
    st.caption("stderr (tail)")
    _code(v["stderr_tail"], height=260 if (v["stderr_tail"] or "").count("\n") > 14 else "content")
    if v["metrics"]:
        st.json(v["metrics"])


def render_run(ctx: Context, run_id: str) -> None:
    """Everything about one run, section after section."""
    detail = ctx.q("run_detail", run_id)
    if detail is None:
        st.subheader(f"Run {code(run_id)}", anchor="run")
        st.warning(f"No run {code(run_id)} in the store.")
        return
    run = detail["run"]
    outcome = detail["validation"]["outcome"] if detail["validation"] else None
    st.subheader(md(run_label(run["agent"], run["task_id"], run["status"], outcome)), anchor="run")
    scroll_if_requested("run")
    model = f" ({md(run['model'])})" if run["model"] else ""
    st.markdown(f"Run {code(run_id)} · **{md(run['agent'])}**{model} · task {code(run['task_id'])} · "
                f"{md(run['benchmark'])} · attempt {run['attempt']} · status **{md(run['status'])}** · "
                f"{(run['duration_s'] or 0):.1f} s · \\${(run['cost_usd'] or 0):.4f} · {(run['tokens'] or 0):,} tokens"
                + (f" · fault injected: {code(run['fault_injected'])}" if run.get("fault_injected") else ""))
    st.markdown(run_links(run_id, run["task_id"], ctx.q("agent_run_of_task", run["task_id"], REFERENCE, run_id)))
    st.markdown("Sections: " + " · ".join(f"[{name}](#{anchor})" for name, anchor in SECTIONS))
    _verdicts(detail)
    _evidence(detail)
    _validator(detail)
    st.subheader("Diff", anchor="diff")
    if detail["outputs"].get("diff_truncated"):
        st.warning("The stored diff was truncated.")
    _code(detail["diff"], "diff", height=480 if detail["diff"].count("\n") > 24 else "content")
    _steps(detail, run_id)
    st.subheader("Task", anchor="task")
    task = detail["task"]
    if task is None:
        st.info(f"Task {code(run['task_id'])} is not in the catalog (`failatlas tasks import`).")
    else:
        st.markdown("**Question.**")
        st.text(task["question"])
        st.markdown("**Method.**")
        st.text(task["method"] or "–")
        with st.expander("Ground truth"):
            st.json(task["ground_truth"], expanded=True)
    st.subheader("Monitor", anchor="monitor")
    findings = detail["findings"]
    if findings.height == 0:
        st.caption("No monitor finding.")
    for r in findings.iter_rows(named=True):
        st.markdown(f"**{md(r['severity'])}** · {code(r['rule'])} ({md(r['source'])})")
        _code(r["evidence"])
    st.subheader("Outputs", anchor="outputs")
    with st.expander("The run's outputs (JSON, without the diff)"):
        st.json({k: v for k, v in detail["outputs"].items() if k != "diff"}, expanded=False)

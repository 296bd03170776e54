"""The forms behind the app's writes: label an insight, a selection or a whole type (Drill-down), and rename,
merge or split types (Taxonomy). Each form calls one function of `failatlas.appdata.actions` and shows its
outcome where the form is, after the rerun that shows the change."""

from __future__ import annotations

import polars as pl
import streamlit as st

from failatlas.appdata import actions
from failatlas.appdata.label_queries import lq
from failatlas.appdata.pages.common import Context, code, md, md_message, param
from failatlas.core.tables import counted

_OUTCOME = "_action_outcome"
_USED = "_action_used_"  # + a form's key: it made a write in this session


def report(outcome: actions.Outcome, where: str) -> None:
    """After a write: rerun, so the page reads the change, and say what was done by the form `where`; a
    refused write is said at once (nothing changed, so nothing to reread)."""
    if outcome.ok:
        st.session_state[_OUTCOME] = (where, outcome.message)
        st.session_state[_USED + where] = True
        st.rerun()
    st.error(md_message(outcome.message))


def show_outcome(where: str) -> bool:
    """The message of the write the form `where` just made, once; True when there was one."""
    pending = st.session_state.get(_OUTCOME)
    if not pending or pending[0] != where:
        return False
    del st.session_state[_OUTCOME]
    st.success(md_message(pending[1]))
    return True


def pending(where: str) -> bool:
    """Whether the expander of the form `where` opens: it has an outcome to show, or it made a write earlier in this
    session. It then stays open for the next one: an expander whose `expanded` changed from one rerun to the next
    would close under the person using it once the outcome had been shown."""
    shown = bool(st.session_state.get(_OUTCOME)) and st.session_state[_OUTCOME][0] == where
    return shown or bool(st.session_state.get(_USED + where))


def _picked(existing: str | None, typed: str) -> str | None:
    return typed.strip() or existing or None


def _category_inputs(ctx: Context, key: str) -> tuple[str | None, str]:
    """An existing category (the seed's, the taxonomy's, the labels given) or a new name typed in."""
    choices = lq(ctx.path, "label_choices", ctx.taxonomy_id)
    cols = st.columns(2)
    existing = cols[0].selectbox("Category", choices, index=None, key=f"{key}_existing",
                                 placeholder="Choose an existing category")
    typed = cols[1].text_input("or a new name", key=f"{key}_new", max_chars=200,
                               placeholder="Type a new category name")
    return existing, typed


def source_text(source: str) -> str:
    """How a label was given, in words."""
    if source == "app":
        return "in the app"
    if source == "insight":
        return "with `failatlas label add`"
    return {"type": "with its whole type", "file": "from a labels file"}.get(source.split(" ", 1)[0], source)


def insight_label(ctx: Context, insight_id: str, text: str) -> None:
    """The insight's label (if any, with a button to remove it) and a form to label it."""
    key = f"label_insight_{insight_id}"
    show_outcome(key)
    current = lq(ctx.path, "insight_labels", (text,)).get(text)
    cols = st.columns([5, 1])
    if current:
        cols[0].markdown(f"**Your label**: {md(current['label'])} (given {md(source_text(current['source']))}; "
                         "kept by the text, so it survives rebuilds and re-ingests)")
        for effect in lq(ctx.path, "label_effects", ctx.taxonomy_id, current["label"]):
            cols[0].caption(f"In this taxonomy's build: {md(effect)}")
        if cols[1].button("Remove label", key=f"unlabel_{insight_id}"):
            report(actions.remove_labels(ctx.path, [insight_id]), key)
    else:
        cols[0].markdown("**Your label**: none yet. Label it below; the next `taxonomy build` learns from labels.")
    with st.form(key, clear_on_submit=True, border=False):
        existing, typed = _category_inputs(ctx, key)
        submitted = st.form_submit_button("Change its label" if current else "Label this insight")
    if submitted:
        name = _picked(existing, typed)
        if name is None:
            st.warning("Choose a category or type a new name first.")
        else:
            report(actions.label_insights(ctx.path, [insight_id], name), key)


def type_labels(ctx: Context, type_id: str, page: pl.DataFrame, total: int) -> None:
    """Label a selection of the listed insights of a type, or the whole type, with one category."""
    key = f"label_type_{type_id}"
    with st.expander("Label insights of this type (a selection, or the whole type)", expanded=pending(key)):
        show_outcome(key)
        shown = {r["insight_id"]: r for r in page.iter_rows(named=True)}
        with st.form(key, clear_on_submit=True, border=False):
            chosen = st.multiselect(
                "Insights to label (this page's)", list(shown), key=f"{key}_pick",
                format_func=lambda i: f"{_short(shown[i]['text'])} (×{shown[i]['n_occurrences']})",
                placeholder="Choose insights of the list above")
            existing, typed = _category_inputs(ctx, key)
            cols = st.columns(2)
            selected = cols[0].form_submit_button("Label the selected insights")
            whole = cols[1].form_submit_button(f"Label the whole type ({counted(total, 'distinct insight')})")
        name = _picked(existing, typed)
        if (selected or whole) and name is None:
            st.warning("Choose a category or type a new name first.")
        elif selected:
            if not chosen:
                st.warning("Choose one or more insights first.")
            else:
                report(actions.label_insights(ctx.path, chosen, name or ""), key)
        elif whole:
            report(actions.label_type(ctx.path, ctx.taxonomy_id or "", type_id, name or ""), key)


def _short(text: str, n: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def taxonomy_edits(ctx: Context) -> None:
    """Rename, merge or split failure types of the shown taxonomy: recorded edits that every later build applies
    again to the types holding most of the same insights (`failatlas taxonomy rename/merge/split`)."""
    key = "tx_edit"
    types = ctx.q("taxonomy_types", ctx.taxonomy_id)
    if types.height == 0:
        return
    labels = {r["failure_type_id"]: f"{r['phase']} · {r['failure_type']} ({r['failure_type_id']})"
              for r in types.iter_rows(named=True)}
    ids = list(labels)
    current = ids.index(param("failure_type")) if param("failure_type") in ids else None  # the type in the URL
    with st.expander("Edit the taxonomy: rename, merge or split types", expanded=pending(key) or current is not None):
        show_outcome(key)
        st.caption(f"Changes taxonomy {code(ctx.taxonomy_id)} and is saved as an edit: every later `taxonomy build` "
                   "applies it again to the types holding most of the same insights (as `failatlas taxonomy "
                   "rename / merge / split` do).")
        rename, merge, split = st.tabs(["Rename", "Merge", "Split"])
        with rename, st.form(f"{key}_rename", clear_on_submit=True, border=False):
            target = st.selectbox("Failure type to rename", ids, format_func=labels.get, key=f"{key}_rename_type",
                                  index=current, placeholder="Choose a failure type")
            name = st.text_input("New name", key=f"{key}_rename_name", max_chars=200)
            definition = st.text_area("New definition (optional)", key=f"{key}_rename_definition",
                                      max_chars=actions.MAX_DEFINITION_CHARS)
            if st.form_submit_button("Rename"):
                report(actions.rename_type(ctx.path, ctx.taxonomy_id or "", target or "", name, definition), key)
        with merge, st.form(f"{key}_merge", clear_on_submit=True, border=False):
            parts = st.multiselect("Failure types to merge (of one phase; the first chosen is kept)", ids,
                                   format_func=labels.get, key=f"{key}_merge_types")
            name = st.text_input("Name of the merged type (optional: the first's)", key=f"{key}_merge_name",
                                 max_chars=200)
            if st.form_submit_button("Merge"):
                report(actions.merge_types(ctx.path, ctx.taxonomy_id or "", parts, name), key)
        with split, st.form(f"{key}_split", clear_on_submit=True, border=False):
            target = st.selectbox("Failure type to split", ids, format_func=labels.get, key=f"{key}_split_type",
                                  index=current, placeholder="Choose a failure type")
            k = st.number_input("Parts (k-means over its insights' vectors; each part named from its insights)",
                                min_value=2, max_value=actions.MAX_SPLIT, value=2, step=1, key=f"{key}_split_k")
            if st.form_submit_button("Split"):
                report(actions.split_type(ctx.path, ctx.taxonomy_id or "", target or "", int(k)), key)

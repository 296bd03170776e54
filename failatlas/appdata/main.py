"""FailAtlas explorer (Streamlit) over the DuckDB store named by $FAILATLAS_DB.

Run with `failatlas --db PATH app`. Pages: Overview, Taxonomy, Drill-down, Map, Compare; the page and the
drill-down's selection live in the URL (`?page=drill&failure_type=...&insight=...&run=...`). Pages read the
store only through `Store.read()` (short-lived read-only connections) and cache every query until the file
changes, so the app keeps working while a benchmark run writes.

It writes two things, only when a person submits one of its forms, and only in `failatlas.appdata.actions`
(one short transaction each, through the functions the CLI uses): labels on insights (`insight_labels`, as
`failatlas label` writes them) and recorded taxonomy edits (rename, merge, split: `taxonomy_edits` and the edited
snapshot's types, as `failatlas taxonomy rename/merge/split` write them). Nothing else.
"""

from __future__ import annotations

import os

import streamlit as st

from failatlas.appdata.pages import PAGES
from failatlas.appdata.pages.common import Context, code, md, param, url_key, wrote_url
from failatlas.core.errors import FailAtlasError, StoreLockedError
from failatlas.core.store import Store

# our one piece of HTML: a constant, no text of a run or task in it (tests/reliability/test_attack_app.py)
PAGE_STYLE = "<style>[data-testid='stMainBlockContainer']{padding-left:2rem;padding-right:2rem}</style>"


def main() -> None:
    """Render the page the URL asks for. Streamlit re-runs the script on every interaction."""
    st.set_page_config(page_title="FailAtlas", layout="wide")
    # Streamlit's wide layout keeps 5rem on each side of the page: at 1440x900, beside the sidebar, 980 px for
    # tables of a dozen columns. 2rem gives them 96 px more (issue 42: columns cut at the right edge).
    st.html(PAGE_STYLE)
    path = str(Store(os.environ.get("FAILATLAS_DB")).path.resolve())
    ctx = Context(path=path, status=None, taxonomy_id=None)  # type: ignore[arg-type]
    ctx.status = ctx.q("store_status")

    current = param("page") if param("page") in PAGES else "overview"
    st.sidebar.title("FailAtlas")
    # the URL sets the radio only when it changed from elsewhere (url_key): a radio keyed by its index became a new
    # widget after each switch and dropped the next click
    keys = list(PAGES)
    page = st.sidebar.radio("Page", keys, index=keys.index(current), format_func=lambda k: PAGES[k][0],
                            key=url_key("page", current))
    if page != current:
        st.query_params.from_dict({"page": page})
    wrote_url("page", page)

    if ctx.status.has("taxonomies"):
        snapshots = ctx.q("taxonomies")
        ids = snapshots["id"].to_list()
        labels = {r["id"]: f"v{r['version']}{' (current)' if r['current'] else ''} · {r['n_types']} types · {r['id']}"
                  for r in snapshots.iter_rows(named=True)}
        wanted = param("taxonomy")
        ctx.taxonomy_id = st.sidebar.selectbox("Taxonomy", ids, index=ids.index(wanted) if wanted in ids else 0,
                                               format_func=labels.get, key=f"taxonomy_{wanted}")
    st.sidebar.caption(f"Store: {code(path)} (read; writes only your labels and taxonomy edits)")
    if st.sidebar.button("Reload data", key="reload"):
        st.cache_data.clear()

    try:
        PAGES[page][1](ctx)
    except StoreLockedError as exc:
        st.warning(f"The store is busy: {md(exc.one_line())}. Reload the page in a moment.")
    except FailAtlasError as exc:
        st.error(md(exc.one_line()))


if __name__ == "__main__":  # `streamlit run` runs this file as __main__
    main()

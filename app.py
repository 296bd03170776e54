"""FailAtlas explorer (Streamlit). Read-only over the DuckDB store named by $FAILATLAS_DB.

Run with `failatlas app [--db PATH]`.
"""

from __future__ import annotations

import os

import streamlit as st

from failatlas.store import Store

st.set_page_config(page_title="FailAtlas", layout="wide")
store = Store(os.environ.get("FAILATLAS_DB"))
st.title("FailAtlas")
if not store.path.exists():
    st.info(f"No store at {store.path}. Run `failatlas tasks import-mini` (or `failatlas demo`) first.")
    st.stop()


@st.cache_data(ttl=30)
def table_counts(path: str) -> dict[str, int]:
    s = Store(path)
    with s.read() as conn:
        names = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='main' ORDER BY 1").fetchall()]
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


st.subheader("Store")
st.table({"table": list(table_counts(str(store.path))), "rows": list(table_counts(str(store.path)).values())})

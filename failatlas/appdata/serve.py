"""The explorer's server process, which `failatlas app` starts: Streamlit's own command line (`streamlit run ...`),
run once the modules the pages and their queries use are imported (issue 54).

Streamlit runs a page's script inside its server process, so whatever the script imports is imported by the first
page a browser opens: the app's pages read through the stages (scores through `bench_core.scoring`, shares through
`taxonomy`), whose imports took seconds, all of them spent on the first load. Imported here before the server
listens, they cost the server's start instead, once, and every page (the first one too) runs only its own work.
`failatlas app` prints the address when the server listens, so a person never waits on a page for them.

The first page's queries are run here too (`warm`), for the same reason: the page a browser opens first finds its
results waiting instead of querying the store."""

from __future__ import annotations

import importlib
import logging
import sys

# What the pages import, and what their queries import when they run (`appdata/queries_*.py` import the stages
# inside their functions, so that the modules stay cheap to import for the CLI and the tests).
PRELOAD = (
    # tables reach the browser through pandas and Arrow (st.dataframe)
    "polars", "duckdb", "pyarrow", "pyarrow.compute", "pyarrow.pandas_compat", "pandas", "pandas.io.formats.string",
    "numpy.ma", "pyarrow.vendored.version", "polars._utils.udfs", "altair", "failatlas.appdata.main",
    *(f"failatlas.appdata.pages.{name}" for name in (
        "common", "overview", "runs", "task_view", "run_diff", "taxonomy_view", "drill", "map_view", "compare")),
    *(f"failatlas.appdata.queries_{name}" for name in (
        "store", "taxonomy", "insights", "run_view", "map", "groups", "runs")),
    "failatlas.bench_core.scoring.metrics", "failatlas.bench_core.scoring.cheat_report",
    "failatlas.bench_core.scoring.report", "failatlas.bench_core.tasks.catalog", "failatlas.bench_core.agents.base",
    "failatlas.taxonomy", "failatlas.cluster.finish",
)


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import `modules`; returns "module: error" for each that could not be imported (the page that needs it says
    why when it is opened), so a missing optional package never stops the server."""
    failed = []
    caching = logging.getLogger("streamlit.runtime.caching.cache_data_api")
    level = caching.level
    caching.setLevel(logging.ERROR)  # a cache declared before the runtime exists: it gets its storage when called
    try:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - reported, and the page that needs it raises it again
                failed.append(f"{name}: {type(exc).__name__}: {exc}")
    finally:
        caching.setLevel(level)
    return failed


def warm() -> str | None:
    """Run the app's script once here, before the server listens, as the first browser will (no URL parameters:
    the Overview), with `cache.warming()` on: each query it asks for runs now and its result waits in `cache.WARM`
    for the first page, which then spends no time querying the store. Outside a server Streamlit's calls draw
    nothing and its widgets answer their defaults, so only the queries and the page's own code run. Returns why it
    did not warm (no store, or an error: the page will say it when it is opened), else None."""
    import os

    from failatlas.core.store import resolve_db_path

    if not resolve_db_path(os.environ.get("FAILATLAS_DB")).is_file():
        return "no store yet"
    from failatlas.appdata import cache, main

    logging.disable(logging.WARNING)  # "missing ScriptRunContext", once per Streamlit call
    try:
        with cache.warming():
            main.main()
    except Exception as exc:  # noqa: BLE001 - reported; the page that fails raises it again when opened
        return f"{type(exc).__name__}: {exc}"
    finally:
        logging.disable(logging.NOTSET)
    return None


def main() -> None:
    """`python -m failatlas.appdata.serve run SCRIPT [streamlit options]`: preload, warm the first page's queries,
    then Streamlit's command line."""
    for line in preload():
        print(f"failatlas app: not preloaded: {line}", file=sys.stderr)
    why = warm()
    if why is not None:
        print(f"failatlas app: first page not warmed: {why}", file=sys.stderr)
    from streamlit.web import cli

    sys.argv = ["streamlit", *sys.argv[1:]]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()

"""Issue 54: what a page load imports. A page imports only its own module (not every page's, and through them every
stage); the server (`failatlas app`, `appdata/serve.py`) imports beforehand what every page and its queries use, so
that no page load, the first included, imports a module of ours or a heavy package.

Each check runs in a fresh Python process (this one has imported half the project already), rendering pages through
Streamlit's AppTest on the fixture store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("failatlas", "altair", "polars", "duckdb", "pyarrow", "numpy", "pandas", "sklearn", "scipy", "torch",
         "umap", "hdbscan", "sentence_transformers", "matplotlib", "pydantic", "openai", "docker")

PROBE = """
import json, os, sys
from streamlit.testing.v1 import AppTest
preload = sys.argv[1] == "preload"
if preload:
    from failatlas.appdata.serve import preload as run_preload
    assert run_preload() == []
before = set(sys.modules)
imported = {}
for page, params in json.loads(sys.argv[2]):
    at = AppTest.from_file(os.path.join(sys.argv[3], "app.py"), default_timeout=300)
    at.query_params.update({"page": page, **params})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    now = set(sys.modules)
    imported[page] = sorted(now - before)
    before = now
print(json.dumps(imported))
"""


def _imports(db: Path, how: str, pages: list[tuple[str, dict]]) -> dict[str, list[str]]:
    """page -> the modules its load imported (each page after the ones before it), in a fresh process."""
    out = subprocess.run([sys.executable, "-c", PROBE, how, json.dumps(pages), str(ROOT)], capture_output=True,
                         text=True, env={"FAILATLAS_DB": str(db), "PATH": "/usr/bin:/bin", "HOME": str(db.parent)},
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ours_or_heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in HEAVY]


def test_the_first_page_imports_no_other_pages_module(app_db: Path) -> None:
    imported = _imports(app_db, "plain", [("overview", {})])["overview"]
    pages = {m.rsplit(".", 1)[1] for m in imported if m.startswith("failatlas.appdata.pages.")}
    assert "overview" in pages and not pages & {"compare", "drill", "map_view", "taxonomy_view", "run_diff"}, pages


def test_after_the_servers_preload_no_page_load_imports_ours_or_a_heavy_package(app_db: Path) -> None:
    from failatlas.appdata.pages import MODULES

    params = {"task": {"task": "t1"}, "diff": {"right": "r1"}, "drill": {"run": "r1"}}
    pages = [(key, params.get(key, {})) for key in MODULES]
    imported = _imports(app_db, "preload", pages)
    assert {page: _ours_or_heavy(mods) for page, mods in imported.items() if _ours_or_heavy(mods)} == {}
    # the same loads without the preload import the stages: what the preload saves the first page
    plain = _imports(app_db, "plain", pages[:1])["overview"]
    assert {"failatlas.bench_core.scoring.metrics", "failatlas.appdata.pages.overview"} <= set(plain)


WARM_PROBE = """
import json, os, sys
from streamlit.testing.v1 import AppTest
from failatlas.appdata import cache, serve
from failatlas.core.store import Store
assert serve.preload() == []
why = serve.warm() if sys.argv[1] != "cold" else "cold"
warmed = len(cache.WARM)
if sys.argv[1] == "changed":  # a writer commits after the warm-up: its results must not be shown
    with Store(os.environ["FAILATLAS_DB"]).write() as conn:
        conn.execute("DELETE FROM judgements")
asked = []
real = cache.query_function
cache.query_function = lambda name: (asked.append(name), real(name))[1]
at = AppTest.from_file(os.path.join(sys.argv[2], "app.py"), default_timeout=300)
at.run()
assert not at.exception, [e.value for e in at.exception]
tables = [el.value.to_dict(orient="list") for el in at.dataframe]
print(json.dumps({"why": why, "warmed": warmed, "left": len(cache.WARM), "asked": asked,
                  "tables": json.loads(json.dumps(tables, default=str))}))
"""


def _first_load(db: Path, how: str) -> dict:
    out = subprocess.run([sys.executable, "-c", WARM_PROBE, how, str(ROOT)], capture_output=True, text=True,
                         env={"FAILATLAS_DB": str(db), "PATH": "/usr/bin:/bin", "HOME": str(db.parent)},
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_servers_warm_up_answers_every_query_of_the_first_page_with_the_same_tables(app_db: Path) -> None:
    cold = _first_load(app_db, "cold")
    warm = _first_load(app_db, "warm")
    assert cold["asked"] and cold["tables"]  # the Overview queries the store and draws tables
    assert warm["why"] is None and warm["warmed"] >= len(set(cold["asked"]))
    assert warm["asked"] == [] and warm["left"] == 0  # every query answered by the warm-up, each taken once
    assert warm["tables"] == cold["tables"]


def test_a_commit_after_the_warm_up_is_shown_not_the_warmed_results(app_db: Path) -> None:
    changed = _first_load(app_db, "changed")
    assert changed["why"] is None and changed["warmed"]
    assert changed["asked"]  # the store's stamp moved: the page queried again
    cold_after = _first_load(app_db, "cold")  # the same store, now without judgements, read without a warm-up
    assert changed["tables"] == cold_after["tables"]


def test_the_warm_up_says_why_it_did_not_warm_and_never_stops_the_server(tmp_path: Path, monkeypatch) -> None:
    from failatlas.appdata import cache, serve

    monkeypatch.setenv("FAILATLAS_DB", str(tmp_path / "none.duckdb"))
    assert serve.warm() == "no store yet" and not (tmp_path / "none.duckdb").exists()
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"not a DuckDB file" * 100)
    monkeypatch.setenv("FAILATLAS_DB", str(bad))
    why = serve.warm()
    assert why is not None and "bad.duckdb" in why
    assert not cache._warming


def test_a_writer_holding_the_store_delays_the_servers_start_by_seconds_not_the_lock_timeout(app_db: Path) -> None:
    import time

    hold = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('holding', flush=True); time.sleep(60)"
    writer = subprocess.Popen([sys.executable, "-c", hold, str(app_db)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "holding"
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-c", "from failatlas.appdata import serve; print(serve.warm())"],
                             capture_output=True, text=True, env={"FAILATLAS_DB": str(app_db), "PATH": "/usr/bin:/bin",
                                                                  "HOME": str(app_db.parent)}, timeout=120)
        took = time.monotonic() - started
    finally:
        writer.kill()
        writer.wait()
    assert out.returncode == 0, out.stderr[-2000:]
    assert "StoreLockedError" in out.stdout and took < 30  # the lock timeout of a page is 60 s

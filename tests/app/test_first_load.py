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

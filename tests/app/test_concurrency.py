"""The explorer keeps working while another process writes, and never opens the store for writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

APP = str(Path(__file__).resolve().parents[2] / "app.py")
ROOT = Path(__file__).resolve().parents[2]
PAGES = ("overview", "taxonomy", "drill", "map", "compare")


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _render(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(page=page, **params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_pages_render_while_a_writer_commits_runs(app_db: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILATLAS_DB", str(app_db))
    waits_file = tmp_path / "waits.json"
    n_runs = 40
    writer = subprocess.Popen([sys.executable, "-m", "tests.app.writer", str(app_db), str(n_runs), str(waits_file)],
                              cwd=ROOT, env=_env())
    rendered = 0
    try:
        while writer.poll() is None or rendered < len(PAGES):
            _render(PAGES[rendered % len(PAGES)], run="r1")
            rendered += 1
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0
    waits = json.loads(waits_file.read_text())
    assert len(waits) == n_runs
    # The app's reads are short: a writer never waits long for them (a write-mode open would hold it for the
    # whole page).
    assert max(waits) < 2.0, waits
    # The cache is keyed by the file's stamp: the overview shows the writer's runs once it has committed them.
    at = _render("overview")
    runs = at.dataframe[0].value
    assert int(runs[runs["agent"] == "writer-agent"]["runs"].iloc[0]) == n_runs


def test_the_app_opens_the_store_read_only(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another process holds a read-only connection: DuckDB then refuses any read-write open, so a page that tried
    # to write would wait out the lock timeout and fail. Read-only opens share the file and go straight through.
    monkeypatch.setenv("FAILATLAS_DB", str(app_db))
    holder = subprocess.Popen([sys.executable, "-m", "tests.app.writer", str(app_db), "hold", "60"], cwd=ROOT,
                              env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        for page in PAGES:
            _render(page, run="r1", failure_type="implementation/T01")
        assert time.monotonic() - started < 30
    finally:
        holder.terminate()
        holder.wait(timeout=30)


def test_the_app_code_has_no_writing_path() -> None:
    # The app reaches the store only through Store.read() and the stages' read functions, except actions.py, its
    # one module that writes (labels and taxonomy edits; tests/app/test_app_actions.py checks it is the only one).
    sources = [ROOT / "app.py", *sorted((ROOT / "failatlas" / "appdata").rglob("*.py"))]
    for source in (s for s in sources if s.name != "actions.py"):
        text = source.read_text()
        for forbidden in (".write(", "open_store(", ".migrate(", "read_only=False"):
            assert forbidden not in text, f"{source.name} contains {forbidden}"

"""End to end: `failatlas --db DB app` starts the real Streamlit server; headless Chromium (Debian's `chromium`,
driven by Playwright) walks the researcher's path, asserting at each step that what it opened is in the viewport:
on the demo's store (the mini-suite's real Docker runs, mined by `failatlas demo`), taxonomy -> "missing
implementation components" -> the first type -> an insight -> its run's diff and validator log; on TRAIL's GAIA
annotations, down to the source record. Screenshots go to test-artifacts/ (docs/img/ holds copies)."""

from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest

from failatlas.store import Store, open_store
from tests.app import walk
from tests.app.fixture import QUESTION, fill_trail_store
from tests.app.server import ROOT, free_port, start, wait_healthy
from tests.app.server import wait_healthy as _wait_healthy  # noqa: F401 - tests/reliability imports it
from tests.taxonomy.fill import insight_id

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 1000}


def _serve(db: Path):  # noqa: ANN202
    port = free_port()
    proc = start(db, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture
def server(app_db: Path) -> str:
    yield from _serve(app_db)


@pytest.fixture
def demo_server(mini_store_copy: Path, tmp_path: Path) -> str:
    """The demo's store: every harness agent's real Docker runs of the mini-suite, scored, then mined by
    `failatlas demo` (which does only what is missing: insights, embeddings, clustering, taxonomy, exports)."""
    from failatlas.demo import run_demo

    run_demo(Store(mini_store_copy), out_dir=tmp_path / "demo-out", sandbox="docker", say=lambda _line: None)
    yield from _serve(mini_store_copy)


@pytest.fixture
def trail_server(shared_data: Path, tmp_path: Path) -> str:
    db = tmp_path / "trail.duckdb"
    fill_trail_store(open_store(db), shared_data / "trail" / "trail_errors_gaia.jsonl")
    yield from _serve(db)


@contextmanager
def _page():  # noqa: ANN202
    """A page of headless Chromium (Debian's), closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport=VIEWPORT)
        finally:
            browser.close()


def _shots(name: str) -> Path:
    folder = ARTIFACTS / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.slow
@pytest.mark.docker
def test_researcher_path_on_the_demo_store(demo_server: str) -> None:
    """Taxonomy -> missing implementation components -> first type -> an insight -> its run, whose header, diff
    and validator log each come into the viewport; two clicks from the type's insight list to the run."""
    shots = _shots("demo")
    with _page() as page:
        first_type = walk.walk_to_run(page, demo_server, shots)
        walk.other_pages(page, demo_server, shots)
    # the largest type under "missing implementation components" is of its kinds: a masked part left out
    assert "left unimplemented" in first_type.lower() or "never created" in first_type.lower(), first_type
    assert (shots / "app-run.png").stat().st_size > 10_000


@pytest.mark.slow
def test_researcher_path_on_trail_ends_at_the_source_record(trail_server: str, shared_data: Path) -> None:
    """On imported TRAIL annotations (no run stored) the insight opens its source record: the trace id, the
    annotator's label and the evidence span, in view; the trace id is one the JSONL holds for that text."""
    with _page() as page:
        shown = walk.walk_to_source_record(page, trail_server, _shots("trail"))
    traces = {json.loads(line)["trace_id"]
              for line in (shared_data / "trail" / "trail_errors_gaia.jsonl").read_text().splitlines()}
    assert any(t in shown for t in traces), shown
    assert "human label" in shown


@pytest.mark.slow
def test_drill_down_in_a_real_browser(server: str, taxonomy_id: str) -> None:
    """The fixture store: a link to an insight, its run button named by agent, task and outcome, and the run's
    question, diff and validator in view once opened (the run opens at the top of the page)."""
    from playwright.sync_api import expect

    torch = insight_id("implementation",
                       "ModuleNotFoundError: No module named 'torchvision' when running train.py")
    with _page() as page:
        page.goto(f"{server}/?page=drill&taxonomy={taxonomy_id}&failure_type=implementation/T01&insight={torch}",
                  wait_until="networkidle")
        open_run = page.get_by_role("button", name="react-agent · task t1 · validator passed")
        expect(open_run).to_be_visible(timeout=60_000)
        open_run.scroll_into_view_if_needed()
        open_run.click()
        expect(page.get_by_role("heading", name="react-agent · task t1 · validator passed")).to_be_in_viewport(
            timeout=60_000)
        assert "run=r1" in page.url
        for text in ("def train(lr=1e-3):", "accuracy 0.912", QUESTION):
            item = page.get_by_text(text).first
            item.scroll_into_view_if_needed()
            expect(item).to_be_in_viewport(timeout=30_000)


@pytest.mark.slow
def test_clicking_a_point_on_the_map_opens_it_in_the_drill_down(server: str) -> None:
    import io

    import numpy as np
    from PIL import Image
    from playwright.sync_api import expect

    with _page() as page:
        page.goto(f"{server}/?page=map", wait_until="networkidle")
        chart = page.locator("[data-testid='stVegaLiteChart']").first
        expect(chart).to_be_visible(timeout=60_000)
        page.wait_for_timeout(2000)
        box = chart.bounding_box()
        pixels = np.asarray(Image.open(io.BytesIO(chart.screenshot())).convert("RGB")).astype(int)
        scale = pixels.shape[1] / box["width"]
        # A point is a saturated disc; the legend's symbols sit in the right quarter, so look left of it.
        plot = pixels[:, : int(pixels.shape[1] * 0.7)]
        saturated = (plot.max(axis=2) - plot.min(axis=2)) > 80
        ys, xs = np.nonzero(saturated)
        assert len(xs), "no point drawn on the map"
        x, y = xs[0] + 2, ys[0] + 2  # just inside the first point found
        page.mouse.click(box["x"] + x / scale, box["y"] + y / scale)
        expect(page.get_by_role("heading", name="Drill-down")).to_be_visible(timeout=60_000)
        assert "page=drill" in page.url and "insight=" in page.url

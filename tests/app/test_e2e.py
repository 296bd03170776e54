"""End to end: `failatlas --db DB app` starts the real Streamlit server; headless Chromium (Debian's `chromium`,
driven by Playwright) loads it, drills down from a failure type to an insight to a run, and saves screenshots
to test-artifacts/."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.app.fixture import QUESTION
from tests.taxonomy.fill import insight_id

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, server: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the app server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"the app server at {url} did not come up in {timeout:.0f} s")


@pytest.fixture
def server(app_db: Path) -> str:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("FAILATLAS_DB", None)
    proc = subprocess.Popen([sys.executable, "-m", "failatlas", "--db", str(app_db), "app", "--port", str(port)],
                            cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.slow
def test_drill_down_in_a_real_browser(server: str, taxonomy_id: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    torch = insight_id("implementation",
                       "ModuleNotFoundError: No module named 'torchvision' when running train.py")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server}/?page=taxonomy", wait_until="networkidle")
        expect(page.get_by_text("Implementation · 3 type(s)")).to_be_visible(timeout=60_000)
        expect(page.locator("[data-testid='stDataFrame'] canvas").first).to_be_visible(timeout=60_000)
        page.wait_for_timeout(2000)  # the grids draw on their canvases after they appear
        page.screenshot(path=str(ARTIFACTS / "app-taxonomy.png"), full_page=True)

        page.goto(f"{server}/?page=overview", wait_until="networkidle")
        expect(page.get_by_text("Funnel: M → M·C·D·I·E")).to_be_visible(timeout=60_000)
        expect(page.locator("[data-testid='stDataFrame'] canvas").first).to_be_visible(timeout=60_000)
        page.wait_for_timeout(2000)  # the funnel chart and the grids draw after the text
        page.screenshot(path=str(ARTIFACTS / "app-overview.png"), full_page=True)

        page.goto(f"{server}/?page=drill&taxonomy={taxonomy_id}&failure_type=implementation/T01&insight={torch}",
                  wait_until="networkidle")
        open_run = page.get_by_role("button", name="Open run r1")
        expect(open_run).to_be_visible(timeout=60_000)
        open_run.click()
        expect(page.get_by_text(QUESTION)).to_be_visible(timeout=60_000)
        assert "run=r1" in page.url
        page.get_by_role("tab", name="Diff").click()
        expect(page.get_by_text("def train(lr=1e-3):")).to_be_visible(timeout=30_000)
        page.evaluate("() => document.querySelectorAll('*').forEach(e => { if (e.scrollTop > 0) e.scrollTop = 0; })")
        page.wait_for_timeout(800)  # let the tab's underline finish moving
        page.screenshot(path=str(ARTIFACTS / "app-drilldown.png"), full_page=False)
        browser.close()
    assert (ARTIFACTS / "app-drilldown.png").stat().st_size > 10_000


@pytest.mark.slow
def test_clicking_a_point_on_the_map_opens_it_in_the_drill_down(server: str) -> None:
    import io

    import numpy as np
    from PIL import Image
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
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
        browser.close()

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
LAPTOP = {"width": 1440, "height": 900}  # the researcher's screen of issue 34


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
def trail_server(shared_data: Path, tmp_path: Path) -> str:
    db = tmp_path / "trail.duckdb"
    fill_trail_store(open_store(db), shared_data / "trail" / "trail_errors_gaia.jsonl")
    yield from _serve(db)


@contextmanager
def _page(viewport: dict | None = None):  # noqa: ANN202
    """A page of headless Chromium (Debian's), closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport=viewport or VIEWPORT)
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
def test_every_click_in_the_sidebar_switches_the_page(server: str) -> None:
    """Each page chosen in the sidebar is shown at once, also back and forth (the radio was keyed by its index,
    became a new widget after each switch, and dropped the next click: the page stayed until a second click)."""
    from playwright.sync_api import expect

    from failatlas.appdata.pages import PAGES

    keys = list(PAGES)
    checked = "() => [...document.querySelectorAll('[data-testid=stSidebar] input[type=radio]')]" \
              ".findIndex(e => e.checked)"
    with _page() as page:
        page.goto(f"{server}/?page=overview", wait_until="networkidle")
        for key in ("taxonomy", "overview", "drill", "overview", "compare", "taxonomy", "overview"):
            page.get_by_test_id("stSidebar").get_by_role("radiogroup").get_by_text(PAGES[key][0], exact=True).click()
            page.wait_for_url(f"**/?page={key}", timeout=30_000)
            expect(page.get_by_role("heading", name=PAGES[key][0]).first).to_be_visible(timeout=30_000)
            assert page.evaluate(checked) == keys.index(key)


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


# -- issue 34: the researcher's path, part 2 ---------------------------------------------------------------------
def _grid_rows(grid) -> list[list[str]]:  # noqa: ANN001
    """The cells of a Streamlit data grid as its accessible table holds them (the grid itself is a canvas)."""
    return [[c.strip() for c in row.locator("th, td").all_inner_texts()]
            for row in grid.locator("table tr").all()]


def _not_cut(grid) -> None:  # noqa: ANN001
    """No column of the grid is cut off: it needs no horizontal scrolling."""
    width, room = grid.locator(".dvn-scroller").first.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert width <= room + 1, f"the table is {width} px wide in {room} px"


def _labels_apart(chart) -> list[str]:  # noqa: ANN001
    """The chart's axis and legend labels (SVG text), asserting that no two of their boxes meet; returns them."""
    texts = chart.locator("svg g.role-axis-label text, svg g.role-legend-label text")
    boxes = [(t.text_content() or "", t.bounding_box()) for t in texts.all()]  # SVG: no inner_text
    boxes = [(name, b) for name, b in boxes if b and b["width"] and name.strip()]
    assert boxes, "the chart has no label"
    for k, (a, p) in enumerate(boxes):
        for b, q in boxes[k + 1:]:
            apart = (p["x"] + p["width"] <= q["x"] or q["x"] + q["width"] <= p["x"]
                     or p["y"] + p["height"] <= q["y"] or q["y"] + q["height"] <= p["y"])
            assert apart, f"label {a!r} overlaps {b!r}: {p} {q}"
    return [name for name, _ in boxes]


@pytest.mark.slow
@pytest.mark.docker
def test_two_clicks_from_each_entry_point_to_a_runs_diff_and_validator_log(demo_server: str) -> None:
    from failatlas.appdata.queries import ENTRY_POINTS

    shots = _shots("demo")
    with _page(LAPTOP) as page:
        for entry in ENTRY_POINTS:
            label = walk.entry_to_run(page, demo_server, entry,
                                      shots if entry == "missing implementation components" else None)
            assert " · task " in label and "run=" in page.url


@pytest.mark.slow
@pytest.mark.docker
def test_compare_gold_with_each_fault_agent(demo_server: str, tmp_path: Path) -> None:
    """Compare at 1440x900, gold against each fault agent, as share of runs and of insights: gold is offered and
    kept, no URL value is replaced silently, each type is one row, every difference carries its interval, no column
    is cut off, and no two chart labels overlap (their SVG boxes are disjoint)."""
    import re

    from playwright.sync_api import expect

    agents = [r[0] for r in Store(tmp_path / "demo.duckdb").query(  # the copy demo_server serves
        "SELECT DISTINCT agent FROM runs WHERE agent LIKE 'fault-%' ORDER BY 1")]
    assert len(agents) >= 5
    shots = _shots("demo")
    difference = re.compile(r"^[+-]?\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]$")
    with _page(LAPTOP) as page:
        for k, agent in enumerate(agents):
            for unit in ("runs", "insights") if k == 0 else ("runs",):
                page.goto(f"{demo_server}/?page=compare&left={agent}&right=gold&unit={unit}",
                          wait_until="networkidle")
                expect(page.get_by_role("heading", name="Compare")).to_be_visible(timeout=60_000)
                grids = page.locator("[data-testid='stDataFrame']")
                expect(grids.first).to_be_visible(timeout=60_000)
                page.wait_for_timeout(1500)
                walk.settled(page)
                assert "not in this store" not in page.inner_text("body")
                assert f"left={agent}" in page.url and "right=gold" in page.url
                for grid in grids.all():
                    grid.scroll_into_view_if_needed()
                    _not_cut(grid)
                    header, *rows = _grid_rows(grid)
                    assert header[1:3] == [agent, "gold"], header
                    names = [r[0] for r in rows]
                    assert len(names) == len(set(names)), names  # one row per type
                    assert rows and all(difference.match(r[3]) for r in rows if unit == "runs"), rows
                for chart in page.locator("[data-testid='stVegaLiteChart']").all():
                    chart.scroll_into_view_if_needed()
                    page.wait_for_timeout(500)
                    shown = _labels_apart(chart)
                    assert agent in shown and "gold" in shown  # the legend names both sides
                if k == 0 and unit == "runs":
                    page.locator("[data-testid='stVegaLiteChart']").first.scroll_into_view_if_needed()
                    page.wait_for_timeout(1000)
                    page.screenshot(path=str(shots / "app-compare.png"))


@pytest.mark.slow
@pytest.mark.docker
def test_taxonomy_page_names_units_and_keeps_one_interval_rule(demo_server: str) -> None:
    """Share of runs: no 'by construction' caption, and every row its interval; share of insights: the caption
    exactly above the phases whose only type holds 100% of them, whose row reads '–'. No '1 insights' anywhere."""
    from playwright.sync_api import expect

    caption = "One failure type in this phase"
    with _page(LAPTOP) as page:
        for unit in ("runs", "insights"):
            page.goto(f"{demo_server}/?page=taxonomy&unit={unit}", wait_until="networkidle")
            expect(page.get_by_role("heading", name="Taxonomy")).to_be_visible(timeout=60_000)
            grids = page.locator("[data-testid='stDataFrame']")
            expect(grids.first).to_be_visible(timeout=60_000)
            page.wait_for_timeout(1500)
            walk.settled(page)
            body = page.inner_text("body")
            assert "1 insights" not in body and "1 runs" not in body
            noun = "insight occurrences" if unit == "insights" else "runs"
            assert f" {noun}" in body
            fixed = 0  # phases whose only type holds 100% of them by construction: no interval
            for grid in grids.all():
                grid.scroll_into_view_if_needed()
                _not_cut(grid)
                header, *rows = _grid_rows(grid)
                assert ("occurrences" if unit == "insights" else "runs affected") in header
                ci = header.index("95% CI (%)")
                assert all((r[ci] == "–") == (unit == "insights" and len(rows) == 1) for r in rows), rows
                fixed += unit == "insights" and len(rows) == 1
            assert body.count(caption) == fixed  # the caption stands exactly above such a row
            assert fixed > 0 if unit == "insights" else fixed == 0

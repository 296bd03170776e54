"""Issue 42, at 1440x900 in real Chromium on the demo's store: every table of every page shows every name whole
(each text of each grid measured against its column as drawn: `tests/app/layout.py`), no table scrolls sideways,
the Runs page's sort box and score filter chips show their text, Run diff shows both sides whole, and the Map's
legend lies inside its chart."""

from __future__ import annotations

from pathlib import Path

import pytest

from failatlas.core.store import Store
from tests.app.layout import cut_cells, not_scrolled
from tests.app.test_e2e import LAPTOP, _page
from tests.app.walk import _grid_row

DONE = ("() => { const app = document.querySelector('[data-testid=stApp]');"
        " return app && app.getAttribute('data-test-script-state') === 'notRunning'"
        " && !document.querySelector('[data-testid=stSkeleton]'); }")


def _open(page, url: str) -> None:  # noqa: ANN001
    page.goto(url)
    page.wait_for_function(DONE, timeout=120_000)
    page.wait_for_timeout(1500)  # grids and charts draw after their frame


def _grids_whole(page, where: str) -> int:  # noqa: ANN001
    """Assert that every grid on the page shows every text whole; returns how many grids it checked."""
    closed = page.locator("[data-testid='stExpander'] details:not([open]) > summary")
    for _ in range(closed.count()):
        closed.first.click()  # what an expander holds is checked too
    page.wait_for_timeout(500)
    grids = page.locator("[data-testid='stDataFrame']").all()
    for grid in grids:
        grid.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        not_scrolled(grid)
        assert cut_cells(grid) == [], where
    return len(grids)


def _text_whole(locator) -> None:  # noqa: ANN001
    """Each element's text is not clipped: a field's text is no wider than the field; a chip's text lies inside
    the chip, and the chip inside its box."""
    for element in locator.all():
        width, room, text = element.evaluate("""e => {
          if (e.tagName === 'INPUT') return [e.scrollWidth, e.clientWidth, e.value];
          const range = document.createRange(); range.selectNodeContents(e);
          const t = range.getBoundingClientRect(), chip = e.closest('[data-tag]').getBoundingClientRect();
          const box = e.closest('[data-testid=stMultiSelectTagsContainer]').getBoundingClientRect();
          const inside = t.left >= chip.left - 0.5 && t.right <= chip.right + 0.5
                         && chip.left >= box.left - 0.5 && chip.right <= box.right + 0.5;
          return [inside ? 0 : t.width, inside ? 0 : Math.min(chip.right, box.right) - t.left, e.innerText]; }""")
        assert width <= room + 1, f"{text!r} is {width} px wide in {room} px"


@pytest.mark.slow
@pytest.mark.docker
def test_every_table_of_the_demo_shows_every_name_whole_at_1440x900(demo_server: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "demo.duckdb")  # the copy demo_server serves
    (task,) = store.query("SELECT task_id FROM runs WHERE agent = 'fault-wrong-constant' ORDER BY 1 LIMIT 1")[0]
    (fault_run,) = store.query("SELECT id FROM runs WHERE agent = 'fault-wrong-constant' AND task_id = ?", [task])[0]
    (type_id,) = store.query("SELECT failure_type_id FROM insight_failure_types GROUP BY 1 ORDER BY count(*) DESC"
                             " LIMIT 1")[0]
    checked = 0
    with _page(LAPTOP) as page:
        for query in ("overview", "runs", f"task&task={task}", f"diff&right={fault_run}", "taxonomy",
                      "taxonomy&unit=runs", "taxonomy&unit=tasks", "compare", "compare&unit=runs",
                      f"drill&failure_type={type_id}"):
            _open(page, f"{demo_server}/?page={query}")
            checked += _grids_whole(page, query)
        # a type's insight list, then one insight: its sources
        _grid_row(page, page.locator("[data-testid='stDataFrame']").last)
        page.wait_for_function(DONE, timeout=120_000)
        page.wait_for_timeout(1500)
        checked += _grids_whole(page, "drill, an insight")
        assert checked >= 12

        # Runs: the sort box and the chips of two score filters show their text
        _open(page, f"{demo_server}/?page=runs&E=0&E=none&M=1&sort=MCDIE")
        chips = page.locator(".st-key-runs_E [data-tag] > span[title]")
        assert chips.all_inner_texts() == ["0", "–"]
        _text_whole(chips)
        _text_whole(page.locator(".st-key-runs_M [data-tag] > span[title]"))
        sort = page.locator(".st-key-runs_sort input")
        assert sort.input_value() == "score M·C·D·I·E"
        _text_whole(sort)
        checked += _grids_whole(page, "runs, filtered")

        # Run diff: the two sides next to each other, each shown whole (no inner scrolling)
        _open(page, f"{demo_server}/?page=diff&right={fault_run}")
        codes = page.locator("[data-testid='stCode']")
        left, right = codes.nth(0).bounding_box(), codes.nth(1).bounding_box()
        assert abs(left["y"] - right["y"]) < 5 and left["x"] + left["width"] <= right["x"], (left, right)
        for k in (0, 1):
            inner, room = codes.nth(k).locator("pre").first.evaluate("e => [e.scrollHeight, e.clientHeight]")
            assert inner <= room + 1, f"side {k}: {inner} px of diff in {room} px"

        # Map: every legend label inside the chart
        _open(page, f"{demo_server}/?page=map")
        chart = page.locator("[data-testid='stVegaLiteChart']").first
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(800)
        frame = chart.bounding_box()
        labels = chart.locator("svg g.role-legend-label text").all()
        assert labels
        for label in labels:
            box = label.bounding_box()
            assert box["x"] >= frame["x"] - 1 and box["x"] + box["width"] <= frame["x"] + frame["width"] + 1, (
                label.text_content(), box, frame)
            assert box["y"] + box["height"] <= frame["y"] + frame["height"] + 1, (label.text_content(), box, frame)

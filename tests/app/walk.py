"""The researcher's path through the explorer in a real browser (Playwright): from the taxonomy to a failure type,
an insight, and its run (diff, validator log) or, for imported data, its source record. Each step asserts that what
it opened is in the viewport, not merely somewhere on the page."""

from __future__ import annotations

from pathlib import Path

ENTRY = "Missing implementation components"


def entry_button(page, entry: str):  # noqa: ANN001, ANN201
    """The entry point's button (its label may carry counts after the name)."""
    return page.get_by_role("button").filter(has_text=entry.capitalize()).first


def _grid_row(page, grid, row: int = 0, tries: int = 3, in_url: str = "insight=") -> None:  # noqa: ANN001
    """Click the selection box of a row of a Streamlit data grid (a canvas: no DOM row to click), until the
    selection reaches the URL (`in_url`)."""
    import re

    for attempt in range(tries):
        grid.scroll_into_view_if_needed()
        box = grid.bounding_box()
        header = row_height = 35  # Streamlit's grid: 35 px header and rows
        page.mouse.click(box["x"] + 14, box["y"] + header + row_height * row + row_height / 2)
        try:
            page.wait_for_url(re.compile(re.escape(in_url)), timeout=30_000)
            return
        except Exception:  # noqa: BLE001 - Playwright's TimeoutError; the last try re-raises
            if attempt == tries - 1:
                raise


def _click_until(page, target, in_url: str, tries: int = 3) -> None:  # noqa: ANN001
    """Click, and click again if the app was busy re-running and the URL did not change (a click that lands while
    Streamlit swaps the page is dropped); each try waits up to 30 s."""
    import re

    for attempt in range(tries):
        target.click()
        try:
            page.wait_for_url(re.compile(re.escape(in_url)), timeout=30_000)
            return
        except Exception:  # noqa: BLE001 - Playwright's TimeoutError; the last try re-raises below
            if attempt == tries - 1:
                raise


RUNNING = "[data-testid='stStatusWidgetRunningIcon']"  # Streamlit's "Running..." icon, unmounted when the run ends


def settled(page, timeout_ms: int = 60_000, quiet_ms: int = 800) -> None:  # noqa: ANN001
    """Wait until Streamlit has finished running the page's script: its running icon absent for `quiet_ms` in a row
    (elements arrive over the websocket as the script runs, after `networkidle`; a page read before the run ends
    may miss its last sections). Streamlit shows the icon once a run has lasted 500 ms (1.67's status widget), so a
    quiet window longer than that also sees a run that had just begun. Raises AssertionError when it is still
    running after `timeout_ms`."""
    import time

    until = time.monotonic() + timeout_ms / 1000
    quiet_since = None
    while time.monotonic() < until:
        if page.locator(RUNNING).count():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif (time.monotonic() - quiet_since) * 1000 >= quiet_ms:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"the page was still running its script after {timeout_ms / 1000:.0f} s")


def _shot(page, shots: Path | None, name: str) -> None:  # noqa: ANN001
    if shots is not None:
        page.wait_for_timeout(1200)  # grids and charts draw after their frame appears
        page.screenshot(path=str(shots / name), full_page=False)


def open_first_insight(page, url: str, entry: str, shots: Path | None = None) -> str:  # noqa: ANN001
    """Taxonomy page -> the entry point -> its first (best matching) failure type -> the first insight of that
    type. Returns the failure type's label as shown."""
    from playwright.sync_api import expect

    page.goto(f"{url}/?page=taxonomy", wait_until="networkidle")
    start = entry_button(page, entry)
    expect(start).to_be_visible(timeout=60_000)
    _shot(page, shots, "app-taxonomy.png")
    start.click()
    first_type = page.locator("[class*='st-key-entry_open_'] button").first
    expect(first_type).to_be_in_viewport(timeout=60_000)
    _shot(page, shots, "app-entry-point.png")
    label = first_type.inner_text()
    _click_until(page, first_type, "failure_type=")
    heading = page.get_by_role("heading", name="Failure type")
    expect(heading).to_be_in_viewport(timeout=60_000)
    expect(page.get_by_text("No insight selected.")).to_be_visible(timeout=30_000)
    insights = page.locator("[data-testid='stDataFrame']").last
    expect(insights.locator("canvas").first).to_be_visible(timeout=30_000)
    page.wait_for_timeout(1000)
    _shot(page, shots, "app-failure-type.png")
    _grid_row(page, insights)
    expect(page.get_by_role("heading", name="Insight", exact=True)).to_be_in_viewport(timeout=60_000)
    assert "insight=" in page.url
    return label


def walk_to_run(page, url: str, shots: Path | None = None) -> str:  # noqa: ANN001
    """... -> the insight's first run: its header comes into view, then its diff and its validator log. Returns
    the label of the failure type the entry point listed first."""
    from playwright.sync_api import expect

    first_type = open_first_insight(page, url, ENTRY, shots)
    run_button = page.locator("[class*='st-key-open_run_'] button").first  # the insight's, not the entry's
    expect(run_button).to_be_in_viewport(timeout=60_000)
    _shot(page, shots, "app-insight.png")
    label = run_button.inner_text()
    _click_until(page, run_button, "run=")
    header = page.get_by_role("heading", name=label)
    expect(header).to_be_in_viewport(timeout=60_000)  # the run opens in view, not 2,300 px above it
    assert "run=" in page.url
    _shot(page, shots, "app-run.png")
    page.locator("#diff").scroll_into_view_if_needed()
    diff = page.locator("code").filter(has_text="diff --git").first
    diff.scroll_into_view_if_needed()
    expect(diff).to_be_in_viewport(timeout=30_000)
    _shot(page, shots, "app-run-diff.png")
    page.locator("#validator").scroll_into_view_if_needed()
    outcome = page.get_by_text("Outcome", exact=False).first
    expect(outcome).to_be_in_viewport(timeout=30_000)
    log = page.get_by_text("stdout (tail)").first
    log.scroll_into_view_if_needed()
    expect(log).to_be_in_viewport(timeout=30_000)
    _shot(page, shots, "app-run-validator.png")
    return first_type


_SECTION_TEXT_TOPS = """([text, start, end]) => {
    const top = id => { const e = document.getElementById(id); return e && e.getBoundingClientRect().top; };
    const a = top(start), b = top(end);
    if (text === null) return a === null ? [] : [a];
    return [...document.querySelectorAll('p')].filter(e => e.textContent.trim() === text)
        .map(e => e.getBoundingClientRect().top).filter(y => a !== null && y > a && (b === null || y < b));
}"""


def _link_shows(page, section: str, text: str | None, until: str | None, tries: int = 3) -> None:  # noqa: ANN001
    """Click the run view's section link `section`, then see `text` in that section (between its anchor and
    `until`'s; other sections hold the same words, e.g. every step's "stdout (tail)") inside the viewport, or with
    `text` None the section's heading itself. A click that lands while Streamlit re-runs the page is lost, so it is
    repeated, each try waiting up to 20 s."""
    for attempt in range(tries):
        page.get_by_role("link", name=section, exact=True).click()
        for _ in range(40):
            tops = page.evaluate(_SECTION_TEXT_TOPS, [text, section, until])
            if tops and 0 <= tops[0] < page.viewport_size["height"]:
                return
            page.wait_for_timeout(500)
        assert attempt < tries - 1, f"{text!r} of the {section} section is not in view ({tops or 'not there'})"


def entry_to_run(page, url: str, entry: str, shots: Path | None = None) -> str:  # noqa: ANN001
    """The two clicks of issue 34: the entry point on the Taxonomy page (1), then the first run listed under its
    first type (2); the run opens in view. Then its section links bring the validator's log and the diff into view.
    Returns the run's label."""
    from playwright.sync_api import expect

    page.goto(f"{url}/?page=taxonomy", wait_until="networkidle")
    start = entry_button(page, entry)
    expect(start).to_be_visible(timeout=60_000)
    start.click()  # click 1
    run_button = page.locator("[class*='st-key-entry_run_'] button").first
    expect(run_button).to_be_visible(timeout=60_000)
    _shot(page, shots, "app-entry-point.png")
    label = run_button.inner_text()
    _click_until(page, run_button, "run=")  # click 2
    expect(page.get_by_role("heading", name=label)).to_be_in_viewport(timeout=60_000)
    _link_shows(page, "validator", "stdout (tail)", until="diff")
    _link_shows(page, "diff", None, until=None)
    return label


def other_pages(page, url: str, shots: Path) -> None:  # noqa: ANN001
    """Screenshots of the pages the walk does not pass: Overview, Map, Compare."""
    from playwright.sync_api import expect

    for name, heading in (("overview", "Overview"), ("map", "Map"), ("compare", "Compare")):
        page.goto(f"{url}/?page={name}", wait_until="networkidle")
        expect(page.get_by_role("heading", name=heading)).to_be_visible(timeout=60_000)
        page.wait_for_timeout(4000)  # charts and grids draw after the text
        page.screenshot(path=str(shots / f"app-{name}.png"), full_page=False)


def walk_to_source_record(page, url: str, shots: Path | None = None) -> str:  # noqa: ANN001
    """On imported data (no run behind an insight): ... -> the insight's source record, with its trace id, human
    label and evidence in view. Returns the trace id shown."""
    from playwright.sync_api import expect

    page.goto(f"{url}/?page=drill", wait_until="networkidle")
    expect(page.get_by_role("heading", name="Failure type")).to_be_visible(timeout=60_000)
    insights = page.locator("[data-testid='stDataFrame']").last
    expect(insights.locator("canvas").first).to_be_visible(timeout=30_000)
    page.wait_for_timeout(1000)
    _grid_row(page, insights)
    record = page.get_by_text("Source record", exact=False).first
    expect(record).to_be_in_viewport(timeout=60_000)
    for shown in ("trace", "human label", "Evidence (the annotated span of the trace)"):
        item = page.get_by_text(shown, exact=False).first
        item.scroll_into_view_if_needed()
        expect(item).to_be_in_viewport(timeout=30_000)
    _shot(page, shots, "app-trail-source-record.png")
    return page.get_by_text("trace", exact=False).first.inner_text()

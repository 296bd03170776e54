"""End to end, in headless Chromium at 1440x900 on the demo's store (the mini-suite's real Docker runs of every
harness agent, mined by `failatlas demo`; the fixtures of test_e2e.py): the run list filtered by agent and sorted
by a phase score, a run opened from its row, the task's view with its runs across agents, and the side-by-side diff
of the gold run against a fault agent's, asserting at each step what is on screen. Screenshots of the three pages
go to test-artifacts/demo/ (docs/img/ holds copies)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from failatlas.bench_core.tasks.twins import REAL_TASK_SQL
from failatlas.store import Store
from tests.app import walk
from tests.app.test_e2e import LAPTOP, _grid_rows, _not_cut, _page, _shots

FAULT = "fault-wrong-constant"  # restores the reference with one constant changed: its diff differs from gold's


def _choose(page, key: str, option: str) -> None:  # noqa: ANN001
    """Pick `option` in the multiselect or selectbox with this widget key, as a person does: open it, type, pick."""
    box = page.locator(f".st-key-{key}")
    box.locator("input").first.click()
    box.locator("input").first.fill(option)
    page.get_by_role("option", name=option, exact=True).first.click()
    page.keyboard.press("Escape")


def _grid(page):  # noqa: ANN001, ANN202
    from playwright.sync_api import expect

    grid = page.locator("[data-testid='stDataFrame']").first
    expect(grid.locator("canvas").first).to_be_visible(timeout=60_000)
    page.wait_for_timeout(1500)  # the grid draws its rows after its frame
    return grid


def _columns(grid) -> list[dict[str, str]]:  # noqa: ANN001
    header, *rows = _grid_rows(grid)
    return [dict(zip(header, row, strict=False)) for row in rows if any(row)]


@pytest.mark.slow
@pytest.mark.docker
def test_run_list_task_view_and_gold_against_a_fault_agent(demo_server: str, tmp_path: Path) -> None:  # noqa: F811
    from playwright.sync_api import expect

    store = Store(tmp_path / "demo.duckdb")  # the copy demo_server serves
    (task_id,) = store.query("SELECT task_id FROM runs WHERE agent = ? ORDER BY task_id LIMIT 1", [FAULT])[0]
    shots = _shots("demo")
    with _page(LAPTOP) as page:
        # 1. the run list, filtered by two agents and sorted by E (passed first)
        page.goto(f"{demo_server}/?page=runs", wait_until="networkidle")
        expect(page.get_by_role("heading", name="Runs")).to_be_visible(timeout=60_000)
        _grid(page)
        for agent in ("gold", FAULT):
            _choose(page, "runs_agent", agent)
            page.wait_for_url(re.compile(f"agent={agent}"), timeout=30_000)
        _choose(page, "runs_sort", "score E")
        page.wait_for_url(re.compile("sort=E"), timeout=30_000)
        grid = _grid(page)
        rows = _columns(grid)
        n_runs = store.query(  # runs of impossible twins are listed nowhere but in the cheat rate
            f"SELECT count(*) FROM runs r JOIN tasks t ON t.id = r.task_id WHERE r.agent IN ('gold', ?)"
            f" AND {REAL_TASK_SQL}", [FAULT])[0][0]
        assert len(rows) == n_runs and {r["agent"] for r in rows} == {"gold", FAULT}, rows
        scores = [r["E"] for r in rows]
        order = {"1": 0, "0": 1, "–": 2}
        assert [order[s] for s in scores] == sorted(order[s] for s in scores), scores  # 1s, 0s, then unscored
        assert rows[0]["agent"] == "gold" and rows[0]["E"] == "1", rows  # gold re-runs pass the validator
        walk.settled(page)
        assert f"{n_runs} runs of" in page.inner_text("body")
        tasks = {r[0] for r in store.query("SELECT task_id FROM runs")}
        assert all(r["task"].removeprefix("?page=task&task=") in tasks for r in rows), rows  # the task's view
        _not_cut(grid)  # every column fits 1440 px
        page.screenshot(path=str(shots / "app-runs.png"))
        # the URL holds the view: opened afresh it shows the same rows
        page.goto(page.url, wait_until="networkidle")
        assert [r["agent"] for r in _columns(_grid(page))] == [r["agent"] for r in rows]

        # 2. a click on the fault agent's first row opens that run's view
        first = next(k for k, r in enumerate(rows) if r["agent"] == FAULT)
        walk._grid_row(page, _grid(page), row=first, in_url="run=")
        heading = page.get_by_role("heading", name=re.compile(f"^{FAULT} · task "))
        expect(heading).to_be_in_viewport(timeout=60_000)
        assert "page=drill" in page.url

        # 3. the task's view: its prompt and its runs across agents, each with outcome and monitor verdict
        page.goto(f"{demo_server}/?page=task&task={task_id}", wait_until="networkidle")
        expect(page.get_by_role("heading", name="Task", exact=True)).to_be_visible(timeout=60_000)
        grid = _grid(page)
        _not_cut(grid)
        runs = _columns(grid)
        agents = {r[0] for r in store.query("SELECT DISTINCT agent FROM runs WHERE task_id = ?", [task_id])}
        assert {r["agent"] for r in runs} == agents and "gold" in agents and len(agents) >= 5
        peek = [r for r in runs if r["agent"] == "fault-peek"]
        assert all(r["monitor"] == "flagged" and r["M"] == "0" for r in peek), peek  # it read the ground truth
        expect(page.get_by_text("## Research question").first).to_be_visible(timeout=30_000)
        page.screenshot(path=str(shots / "app-task.png"))

        # 4. gold against the fault agent, side by side, from the task's button
        button = page.locator("[class*='st-key-task_diff_'] button").filter(has_text=FAULT).first
        button.scroll_into_view_if_needed()
        walk._click_until(page, button, "page=diff")
        expect(page.get_by_role("heading", name="Run diff")).to_be_visible(timeout=60_000)
        (gold_run,) = store.query("SELECT id FROM runs WHERE agent = 'gold' AND task_id = ?", [task_id])[0]
        assert f"left={gold_run}" in page.url
        codes = page.locator("[data-testid='stCode']")
        expect(codes.nth(1)).to_be_visible(timeout=30_000)
        left, right = codes.nth(0).bounding_box(), codes.nth(1).bounding_box()
        assert abs(left["y"] - right["y"]) < 5 and left["x"] + left["width"] <= right["x"], (left, right)
        # Streamlit streams a page's elements: the last section may arrive after both diff columns show (CI read
        # the body once before "Diff of the diffs" had come), so wait for it before reading the page's text
        expect(page.get_by_role("heading", name="Diff of the diffs")).to_be_visible(timeout=30_000)
        walk.settled(page)
        body = page.inner_text("body")
        assert "gold · task" in body and f"{FAULT} · task" in body and "different tasks" not in body
        page.locator("#files").evaluate("e => e.scrollIntoView({block: 'start'})")  # the files, then the columns
        page.wait_for_timeout(1000)
        page.screenshot(path=str(shots / "app-run-diff-side-by-side.png"))

        # 5. a run without a diff, and two runs of different tasks, are said so
        (null_run,) = store.query("SELECT id FROM runs WHERE agent = 'null' AND task_id = ?", [task_id])[0]
        page.goto(f"{demo_server}/?page=diff&right={null_run}", wait_until="networkidle")
        expect(page.get_by_text("This run has no diff").first).to_be_visible(timeout=60_000)
        assert f"left={gold_run}" in page.url
        (other,) = store.query("SELECT id FROM runs WHERE agent = ? AND task_id <> ? LIMIT 1", [FAULT, task_id])[0]
        page.goto(f"{demo_server}/?page=diff&left={gold_run}&right={other}", wait_until="networkidle")
        expect(page.get_by_text("The two runs are of different tasks").first).to_be_visible(timeout=60_000)


def _pick_option(page, key: str, text: str) -> None:  # noqa: ANN001
    """Pick the option starting with `text` in the select box whose widget key starts with `key`."""
    box = page.locator(f"[class*='st-key-{key}']").first
    box.locator("input").first.click()
    box.locator("input").first.fill(text)
    page.get_by_role("option").filter(has_text=re.compile(f"^{re.escape(text)}")).first.click()


@pytest.mark.slow
@pytest.mark.docker
def test_every_pick_of_a_task_or_a_run_takes_effect(demo_server: str, tmp_path: Path) -> None:
    """Three tasks picked in a row on Task, then two right-hand runs in a row on Run diff: each pick shows at once
    (the box was keyed by the URL's value, which the pick rewrote: the next pick went to a box about to be
    replaced and was dropped, so every second pick did nothing)."""
    from playwright.sync_api import expect

    store = Store(tmp_path / "demo.duckdb")  # the copy demo_server serves
    tasks = [t for (t,) in store.query(f"SELECT DISTINCT r.task_id FROM runs r JOIN tasks t ON t.id = r.task_id"
                                       f" WHERE {REAL_TASK_SQL} ORDER BY r.task_id")]
    assert len(tasks) >= 4, tasks
    with _page(LAPTOP) as page:
        page.goto(f"{demo_server}/?page=task&task={tasks[0]}", wait_until="networkidle")
        expect(page.get_by_role("heading", name="Task", exact=True)).to_be_visible(timeout=60_000)
        for task in tasks[1:4]:
            _pick_option(page, "task_pick", task)
            page.wait_for_url(re.compile(f"task={re.escape(task)}$"), timeout=30_000)
            expect(page.locator("[class*='st-key-task_pick'] input").first).to_have_value(
                re.compile(f"^{re.escape(task)} "), timeout=30_000)

        task = tasks[0]
        runs = dict(store.query("SELECT agent, id FROM runs WHERE task_id = ? AND agent IN ('null', ?, ?)",
                                [task, FAULT, "fault-crash"]))
        assert len(runs) == 3, runs
        page.goto(f"{demo_server}/?page=diff&right={runs['null']}", wait_until="networkidle")
        expect(page.get_by_role("heading", name="Run diff")).to_be_visible(timeout=60_000)
        for agent in (FAULT, "fault-crash"):
            _pick_option(page, "diff_right", f"{agent} · task {task}")
            page.wait_for_url(re.compile(f"right={runs[agent]}"), timeout=30_000)
            expect(page.locator("[class*='st-key-diff_right'] input").first).to_have_value(
                re.compile(f"^{re.escape(agent)} "), timeout=30_000)

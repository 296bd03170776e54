"""The run view's header links to the run's task (`?page=task&task=...`) and to its diff against the task's gold run
(`?page=diff&left=<gold>&right=<run>`), URL-encoded whatever the ids hold; each link, followed, opens that page on
that task and those runs. Through Streamlit's AppTest on the fixture store (a real DuckDB file)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from failatlas.store import Store
from tests.app.test_pages import render, texts
from tests.app.test_runs_pages import add_gold

# A task and runs whose ids hold what a URL, Markdown or a code span would misread.
ODD_TASK = "odd task/α&b=c?d#e+f%20 [x](y) `z`"
ODD_RUN = "run &=?#+ %41 (1)"
ODD_GOLD = "gold/run ]) 2"
LINK = re.compile(r"\]\((\?[^)\s]*)\)")


def header_links(at: AppTest) -> dict[str, dict[str, list[str]]]:
    """The run header's links (the Markdown line that links to the task), by page, as their query parameters."""
    (line,) = [m.value for m in at.markdown if "?page=task&" in m.value]
    links = {}
    for url in LINK.findall(line):
        found = parse_qs(url[1:], keep_blank_values=True, strict_parsing=True)
        links[found.pop("page")[0]] = found
    return links


def follow(db: Path, monkeypatch: pytest.MonkeyPatch, page: str, found: dict[str, list[str]]) -> AppTest:
    return render(db, monkeypatch, page=page, **{name: values[0] for name, values in found.items()})


def add_odd_runs(db: Path) -> None:
    """Copies of the fixture's run r1 (react-agent) and of the gold run g1 under ODD_TASK."""
    with Store(db).write() as conn:
        conn.execute("INSERT INTO runs SELECT * REPLACE (? AS id, ? AS task_id) FROM runs WHERE id = 'r1'",
                     [ODD_RUN, ODD_TASK])
        conn.execute("INSERT INTO runs SELECT * REPLACE (? AS id, ? AS task_id) FROM runs WHERE id = 'g1'",
                     [ODD_GOLD, ODD_TASK])


def test_a_run_links_to_its_task_and_to_its_diff_against_gold(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_gold(app_db)
    at = render(app_db, monkeypatch, page="drill", run="r1")
    assert "task t1 · diff against gold" in texts(at)
    links = header_links(at)
    assert links == {"task": {"task": ["t1"]}, "diff": {"left": ["g1"], "right": ["r1"]}}
    task = follow(app_db, monkeypatch, "task", links["task"])
    assert "4 runs by 3 agents" in texts(task) and "from the link is not in this store" not in texts(task)
    diff = follow(app_db, monkeypatch, "diff", links["diff"])
    assert diff.selectbox(key="diff_left_1").value == "g1"  # url_key's first version in a new session
    assert diff.selectbox(key="diff_right_1").value == "r1"
    assert not diff.warning


def test_ids_of_any_characters_travel_url_encoded(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_gold(app_db)
    add_odd_runs(app_db)
    at = render(app_db, monkeypatch, page="drill", run=ODD_RUN)
    links = header_links(at)
    assert links == {"task": {"task": [ODD_TASK]}, "diff": {"left": [ODD_GOLD], "right": [ODD_RUN]}}
    (line,) = [m.value for m in at.markdown if "?page=task&" in m.value]
    assert len(LINK.findall(line)) == 2  # nothing in an id ends a link early or starts another
    task = follow(app_db, monkeypatch, "task", links["task"])
    assert "2 runs by 2 agents" in texts(task) and "from the link is not in this store" not in texts(task)
    diff = follow(app_db, monkeypatch, "diff", links["diff"])
    assert diff.selectbox(key="diff_left_1").value == ODD_GOLD
    assert diff.selectbox(key="diff_right_1").value == ODD_RUN
    assert not diff.warning


def test_without_another_gold_run_the_diff_page_picks_the_left_side(app_db: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch, page="drill", run="r1")  # the fixture holds no gold run
    assert "diff against another run (no other gold run of this task)" in texts(at)
    assert header_links(at)["diff"] == {"right": ["r1"]}
    add_gold(app_db)
    at = render(app_db, monkeypatch, page="drill", run="g1")  # the only gold run is never set against itself
    assert header_links(at)["diff"] == {"right": ["g1"]}


def test_the_cache_finds_every_query_that_queries_exports() -> None:
    """`ctx.q(name)` looks a query up in `cache.MODULES`: every module `queries` re-exports must be among them."""
    from failatlas.appdata import cache, queries

    modules = [importlib.import_module(name) for name in cache.MODULES]
    lost = [name for name in queries.__all__ if not any(hasattr(m, name) for m in modules)]
    assert not lost, lost
    homes = {value.__module__ for value in map(queries.__dict__.get, queries.__all__) if inspect.isfunction(value)}
    assert homes <= set(cache.MODULES), homes
    for name in queries.__all__:
        if inspect.isfunction(queries.__dict__[name]):
            assert cache.query_function(name) is queries.__dict__[name], name

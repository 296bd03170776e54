"""The explorer's pages timed beside Streamlit's own floor (issue 54), and every page cold and warm on the demo's store
and on a synthetic store of 20,000 runs (issue 42, `--detail`).

The default measure, in one run, side by side: the floor is a near-empty Streamlit script (a sidebar radio of the
app's page titles, and the chosen title as a header) served by plain `streamlit run` with `failatlas app`'s options;
the app is `failatlas app` on the given store. For each: the server's start (the command started until its health
check answers), the first load (a fresh browser opens the first page until its script has finished and nothing is
left loading: Overview, the page a person sees first) and a switch to each page (chosen in the sidebar of that
session, until its rerun has finished). The floor's switch reruns its script for the radio's choice. The ratio app /
floor is printed beside each row, with the load average before and after; the target is the app's first load within
2x the floor's.

    failatlas --db demo.duckdb demo                        # a fresh demo store (minutes: real Docker runs)
    python benchmarks/app_pages.py --demo demo.duckdb [--rounds 3]   # first load and switches beside the floor
    python benchmarks/app_pages.py --demo demo.duckdb --detail [--runs 20000] [--insights 40000] [--repeats 3]
        [--keep large.duckdb] [--no-browser | --browser-only]

`--detail`: two measures. The script: each page rendered through Streamlit's AppTest (the page script run as the
server runs it, in this process, so `st.cache_data` is shared between renders as between a server's sessions);
cold with the query cache cleared first, warm with the cache answering. The browser: headless Chromium at 1440x900
against the real server (`failatlas app`), from the action to the script's end with nothing left loading: cold (the
rerun "Reload data" starts after clearing the cache: the page's queries read the store, in the session already
open) and warm load (the page's URL opened afresh, the cache answering: a new session, the app's JavaScript loaded
and its websocket opened first, so it is more than a click inside the app costs), and warm switch (the page chosen
in the sidebar of the session already open, from another page: what a click inside the app costs). Warm: best and
median of `--repeats`. The synthetic store is `app_render.build`'s (runs judged and validated, insights on 500
tasks, a 100-type taxonomy with a 2-D map), each run given a small diff so that Run diff has something to draw.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PAGES = ("overview", "runs", "task", "diff", "taxonomy", "drill", "map", "compare")
DIFF = ("diff --git a/model.py b/model.py\n--- a/model.py\n+++ b/model.py\n@@ -1,3 +1,3 @@\n def fit(x):\n"
        "-    raise NotImplementedError\n+    return x.mean()\n")


def page_params(path: Path, page: str) -> dict[str, str]:
    """The URL parameters a page needs to show something: a task with runs, a run with a gold run beside it."""
    from failatlas.core.store import Store

    store = Store(path)
    if page == "task":
        (task,) = store.query("SELECT task_id FROM runs GROUP BY task_id ORDER BY count(*) DESC, task_id LIMIT 1")[0]
        return {"task": task}
    if page == "diff":
        rows = store.query("SELECT id FROM runs WHERE agent <> 'gold' AND task_id IN (SELECT task_id FROM runs"
                           " WHERE agent = 'gold') ORDER BY id LIMIT 1") or store.query(
                               "SELECT id FROM runs ORDER BY id LIMIT 1")
        return {"right": rows[0][0]}
    return {}


@functools.cache
def _components():  # noqa: ANN202
    from streamlit.components.v2.component_manager import BidiComponentManager

    manager = BidiComponentManager()
    manager.discover_and_register_components(start_file_watching=False)
    return manager


def render(path: Path, page: str, params: dict[str, str]) -> float:
    """Seconds to run the app's script once for `page`; raises when the page failed or showed nothing."""
    from streamlit.testing.v1 import AppTest

    os.environ["FAILATLAS_DB"] = str(path)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=600)
    # AppTest scans every installed package's metadata for components on each new instance (3 s on this machine,
    # more than any page): a server does that once when it starts, so one scan serves every render here
    at._bidi_component_manager = _components()  # noqa: SLF001
    at.query_params.update({"page": page, **params})
    started = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - started
    if at.exception:
        raise RuntimeError(f"{page}: {at.exception[0].value}")
    if not (len(at.main.dataframe) + len(at.get("vega_lite_chart")) + len(at.get("arrow_vega_lite_chart"))
            + len(at.main.code)):
        raise RuntimeError(f"the {page} page showed no data: {[i.value for i in at.main.info]}")
    return elapsed


def time_pages(path: Path, repeats: int) -> dict[str, tuple[float, list[float]]]:
    """page -> (cold seconds, warm seconds of each repeat)."""
    import streamlit as st

    out = {}
    for page in PAGES:
        params = page_params(path, page)
        st.cache_data.clear()
        cold = render(path, page, params)
        out[page] = (cold, [render(path, page, params) for _ in range(repeats)])
    return out


DONE = ("() => { const app = document.querySelector('[data-testid=stApp]');"
        " return app && app.getAttribute('data-test-script-state') === 'notRunning'"
        " && !document.querySelector('[data-testid=stSkeleton]'); }")


# set before an action: the page's script ran (its state went to 'running') since; Streamlit's fastest reruns
# start and end between two polls, so the change is watched rather than polled for
WATCH = ("() => { window.__ran = false; new MutationObserver(() => {"
         " const app = document.querySelector('[data-testid=stApp]');"
         " if (app && app.getAttribute('data-test-script-state') === 'running') window.__ran = true; })"
         ".observe(document.body, {attributes: true, subtree: true, attributeFilter: ['data-test-script-state']}); }")
RAN = f"() => window.__ran && ({DONE})()"


def _browser(pw):  # noqa: ANN001, ANN202
    browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
    return browser, browser.new_page(viewport={"width": 1440, "height": 900})


def _load(page, target: str) -> float:  # noqa: ANN001
    """Seconds to open `target` afresh until the script has finished and nothing is loading."""
    started = time.perf_counter()
    page.goto(target)
    page.wait_for_function(DONE, timeout=120_000, polling=20)
    return time.perf_counter() - started


def _after(page, action) -> float:  # noqa: ANN001
    """Seconds from `action` (a click that reruns the script) to the rerun's end with nothing loading."""
    page.evaluate(WATCH)
    started = time.perf_counter()
    action()
    page.wait_for_function(RAN, timeout=120_000, polling=5)
    return time.perf_counter() - started


def browser_times(path: Path, repeats: int) -> dict[str, tuple[float, list[float], list[float]]]:
    """page -> (cold, warm loads, warm switches: seconds) in headless Chromium at 1440x900 against the real server
    (`failatlas app`), each until the script's end with nothing left loading (see the module's notes)."""
    import signal
    from urllib.parse import urlencode

    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from failatlas.appdata.pages import PAGES as TITLES
    from tests.app.server import free_port, start, wait_healthy

    port = free_port()
    proc = start(path, port)
    url = f"http://127.0.0.1:{port}"
    out = {}
    try:
        wait_healthy(url, proc)
        with sync_playwright() as pw:
            browser, page = _browser(pw)

            def choose(name: str):  # noqa: ANN202
                return lambda: page.get_by_test_id("stSidebar").get_by_role("radiogroup").get_by_text(
                    TITLES[name][0], exact=True).click()

            for name in PAGES:
                target = f"{url}/?{urlencode({'page': name, **page_params(path, name)})}"
                _load(page, target)
                cold = _after(page, page.get_by_role("button", name="Reload data").click)
                loads = [_load(page, target) for _ in range(repeats)]
                other = "runs" if name == "overview" else "overview"
                switches = []
                for _ in range(repeats):
                    _after(page, choose(other))
                    switches.append(_after(page, choose(name)))
                out[name] = (cold, loads, switches)
            browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    return out


def floor_times(repeats: int) -> list[float]:
    """Warm loads of an empty Streamlit script (one line of text) served with `failatlas app`'s options: what a
    fresh load costs before any page of ours runs."""
    import signal
    import subprocess

    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from failatlas.app_launcher import app_script, command
    from tests.app.server import free_port, wait_healthy

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "empty.py"
        script.write_text("import streamlit as st\n\nst.write('FailAtlas')\n")
        port = free_port()
        plain = [sys.executable, "-m", "streamlit", *command(port=port)[3:]]  # streamlit run, the app's options
        argv = [str(script) if a == str(app_script()) else a for a in plain]
        proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/"
        try:
            wait_healthy(url.rstrip("/"), proc)
            with sync_playwright() as pw:
                browser, page = _browser(pw)
                _load(page, url)
                loads = [_load(page, url) for _ in range(repeats)]
                browser.close()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    return loads


# the script has finished, nothing is loading, and the page's header (every page of the app and of the floor
# starts with its title as a header) is `title`: a switch is done (the floor's rerun is too fast for WATCH to see)
SHOWN = (f"title => ({DONE})() && [...document.querySelectorAll('[data-testid=stMain] h2')]"
         ".some(h => h.innerText.split('\\n')[0].trim() === title)")
FLOOR_SCRIPT = """import streamlit as st

st.set_page_config(page_title="floor", layout="wide")
page = st.sidebar.radio("Page", {titles!r})
st.header(page)
"""


def _serve(argv: list[str], env: dict[str, str], url: str):  # noqa: ANN202
    """Start a server; returns (its process, seconds until its health check answered)."""
    import subprocess

    from tests.app.server import wait_healthy

    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_healthy(url.rstrip("/"), proc, timeout=300)
    return proc, time.perf_counter() - started


def first_and_switches(argv: list[str], env: dict[str, str], port: int, first: str,
                       titles: list[str]) -> dict[str, float]:
    """One fresh server: its start, the first load of `first` (a path and query), then a switch to each of
    `titles` in the sidebar, in order; seconds each."""
    import signal

    from playwright.sync_api import sync_playwright

    url = f"http://127.0.0.1:{port}"
    proc, start = _serve(argv, env, url)
    out = {"start": start}
    try:
        with sync_playwright() as pw:
            browser, page = _browser(pw)
            out["first load"] = _load(page, url + first)
            for title in titles:
                radio = page.get_by_test_id("stSidebar").get_by_role("radiogroup").get_by_text(title, exact=True)
                started = time.perf_counter()
                radio.click()
                page.wait_for_function(SHOWN, arg=title, timeout=120_000, polling=5)
                out[f"switch to {title}"] = time.perf_counter() - started
            browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    return out


def versus_floor(path: Path, rounds: int = 1) -> None:
    """The app's start, first load and switches beside the floor's (module docstring), with their ratios; with
    `rounds` > 1 the two alternate (floor first, then app first, ...) and each cell is the median over rounds."""
    from failatlas.app_launcher import app_env, app_script, command
    from failatlas.appdata.pages import MODULES
    from tests.app.server import free_port

    titles = [title for title, _ in MODULES.values()]
    order = [*titles[1:], titles[0]]  # from Overview to each page, then back
    load = [os.getloadavg()[0]]
    runs: dict[str, list[dict[str, float]]] = {"floor": [], "app": []}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "floor.py"
        script.write_text(FLOOR_SCRIPT.format(titles=titles))
        for n in range(rounds):
            for side in ("floor", "app") if n % 2 == 0 else ("app", "floor"):
                port = free_port()
                if side == "floor":  # plain `streamlit run` of the floor script, with the app's options
                    plain = [sys.executable, "-m", "streamlit", *command(port=port)[3:]]
                    argv, env = [str(script) if a == str(app_script()) else a for a in plain], dict(os.environ)
                    first = "/"
                else:
                    argv, env, first = command(port=port), app_env(path), "/?page=overview"
                runs[side].append(first_and_switches(argv, env, port, first, order))
                load.append(os.getloadavg()[0])
    floor = {k: statistics.median(r[k] for r in runs["floor"]) for k in runs["floor"][0]}
    app = {k: statistics.median(r[k] for r in runs["app"]) for k in runs["app"][0]}
    print(f"{path}; {rounds} round(s){', medians' if rounds > 1 else ''}; load average "
          f"{' / '.join(f'{x:.1f}' for x in load)} (start, after each server), {os.cpu_count()} cores")
    print("| step | Streamlit floor | failatlas app | app / floor |\n|---|---:|---:|---:|")
    for step in floor:
        print(f"| {step} | {floor[step]:.2f} s | {app[step]:.2f} s | {app[step] / floor[step]:.2f}x |")
    if rounds > 1:
        print("first load, each round: " + ", ".join(
            f"{a['first load']:.2f} / {f['first load']:.2f} s = {a['first load'] / f['first load']:.2f}x"
            for a, f in zip(runs["app"], runs["floor"], strict=True)))
    switches = [k for k in floor if k.startswith("switch")]
    slowest = max(switches, key=app.get)
    print(f"first load: {app['first load'] / floor['first load']:.2f}x the floor (target: at most 2x); "
          f"switches: median {statistics.median(app[k] for k in switches):.2f} s against "
          f"{statistics.median(floor[k] for k in switches):.2f} s, slowest {slowest[10:]} {app[slowest]:.2f} s; "
          f"start + first load: {app['start'] + app['first load']:.2f} s against "
          f"{floor['start'] + floor['first load']:.2f} s", flush=True)


def build_large(path: Path, n_runs: int, n_insights: int) -> None:
    """`app_render.build`'s store, plus a gold agent on a tenth of the runs and a small diff in every run."""
    from app_render import build

    from failatlas.core.store import Store

    build(path, n_insights, n_runs)
    with Store(path).write() as conn:
        conn.execute("UPDATE runs SET agent = 'gold' WHERE hash(id) % 10 = 0")
        conn.execute("UPDATE runs SET outputs = json_object('diff', ?::VARCHAR, 'diff_truncated', false)", [DIFF])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, required=True, help="the store `failatlas demo` filled")
    parser.add_argument("--detail", action="store_true", help="every page cold and warm, on the demo and 20k runs")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--insights", type=int, default=40_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="floor and app, alternating; medians printed")
    parser.add_argument("--no-browser", action="store_true", help="time the page scripts only")
    parser.add_argument("--browser-only", action="store_true", help="time the pages in the browser only")
    parser.add_argument("--keep", type=Path, help="build the large store here and keep it (reused when present)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if not args.detail:
        versus_floor(args.demo, args.rounds)
        return
    detail(args)


def detail(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        large = args.keep or Path(tmp) / "app-pages.duckdb"
        if not large.exists():
            started = time.perf_counter()
            build_large(large, args.runs, args.insights)
            print(f"built {args.runs:,} runs, {args.insights:,} insights in {time.perf_counter() - started:.1f} s")
        stores = {"demo": args.demo, f"{args.runs:,} runs": large}
        for how, timer in (("script (AppTest)", time_pages), ("browser (Chromium, 1440x900)", browser_times)):
            if how.startswith("browser") and args.no_browser:
                continue
            if how.startswith("script") and args.browser_only:
                continue
            results = {name: timer(store, args.repeats) for name, store in stores.items()}
            kinds = ["cold", "warm"] if how.startswith("script") else ["cold", "warm load", "warm switch"]
            print(f"\n{how}; load average {os.getloadavg()[0]:.1f}; warm: best / median of {args.repeats}")
            if how.startswith("browser"):
                floor = floor_times(args.repeats)
                print(f"an empty Streamlit script, warm load: {min(floor):.2f} / {statistics.median(floor):.2f} s")
            print(f"| page | {' | '.join(f'{n} {k}' for n in results for k in kinds)} |")
            print("|---|" + "---|" * len(kinds) * len(results))
            for page in PAGES:
                cells = []
                for name in results:
                    cold, *warm = results[name][page]
                    cells += [f"{cold:.2f} s", *(f"{min(w):.2f} / {statistics.median(w):.2f} s" for w in warm)]
                print(f"| {page} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()

"""Regenerate the explorer's screenshots in docs/img/ (the README's and docs/app.md's) from a fresh demo.

    python scripts/app_screenshots.py                      # runs `failatlas demo` in a temporary folder (minutes)
    python scripts/app_screenshots.py --db demo.duckdb     # a store `failatlas demo` filled

Serves the store with `failatlas app` (tests/app/server.py), walks the researcher's path in headless Chromium at
1440x900 (tests/app/walk.py) and takes each picture once the page's script has finished and every table has drawn
(the README's main picture once showed the Taxonomy page's tables blank: it was taken as the first button appeared).
Each picture is scaled to --width pixels and saved as a 256-colour PNG, so that the images stay small. The TRAIL
picture (app-trail-source-record.png) needs TRAIL's annotations and is left as it is.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DRAWN = ("() => { const app = document.querySelector('[data-testid=stApp]');"
         " if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;"
         " if (document.querySelector('[data-testid=stSkeleton]')) return false;"
         " return [...document.querySelectorAll('[data-testid=stDataFrame]')]"
         "   .filter(g => g.getBoundingClientRect().height > 0 && !g.closest('details:not([open])'))"
         "   .every(g => g.querySelector('canvas') && g.querySelectorAll('table tr').length > 1); }")
FAULT = "fault-wrong-constant"


def _save(page, out: Path, name: str, width: int) -> None:  # noqa: ANN001
    """Wait until the page has finished and drawn its tables, then save the viewport, scaled and quantised."""
    import io

    from PIL import Image

    page.wait_for_function(DRAWN, timeout=120_000, polling=100)
    page.wait_for_timeout(1500)  # a grid draws its rows, a chart its marks, after its frame
    image = Image.open(io.BytesIO(page.screenshot(full_page=False))).convert("RGB")
    image = image.resize((width, round(image.height * width / image.width)), Image.LANCZOS)
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out / name, optimize=True)
    print(f"wrote {out / name} ({(out / name).stat().st_size // 1024} KiB)", flush=True)


def _open(page, url: str) -> None:  # noqa: ANN001
    page.goto(url)
    page.wait_for_function(DRAWN, timeout=120_000, polling=100)


def shoot(db: Path, out: Path, width: int) -> None:
    from playwright.sync_api import sync_playwright

    from failatlas.core.store import Store
    from tests.app import walk
    from tests.app.server import free_port, start, wait_healthy

    store = Store(db)
    (task,) = store.query("SELECT task_id FROM runs WHERE agent = ? ORDER BY task_id LIMIT 1", [FAULT])[0]
    (fault_run,) = store.query("SELECT id FROM runs WHERE agent = ? AND task_id = ?", [FAULT, task])[0]
    port = free_port()
    server = start(db, port)
    url = f"http://127.0.0.1:{port}"
    walk._shot = lambda page, shots, name: shots is not None and _save(page, shots, name, width)  # noqa: SLF001
    try:
        wait_healthy(url, server)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            # taxonomy -> entry point -> type -> insight -> run, its diff and validator log (walk.py's path)
            walk.walk_to_run(page, url, out)
            _open(page, f"{url}/?page=runs&agent=gold&agent={FAULT}&sort=E")
            _save(page, out, "app-runs.png", width)
            _open(page, f"{url}/?page=task&task={task}")
            _save(page, out, "app-task.png", width)
            _open(page, f"{url}/?page=diff&right={fault_run}")
            page.locator("#files").evaluate("e => e.scrollIntoView({block: 'start'})")
            _save(page, out, "app-run-diff-side-by-side.png", width)
            for name in ("overview", "map", "compare"):
                _open(page, f"{url}/?page={name}")
                _save(page, out, f"app-{name}.png", width)
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a store `failatlas demo` filled (default: run the demo afresh)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--width", type=int, default=1200, help="width of the saved pictures, in pixels")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="failatlas-shots-") as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "demo.duckdb"
            subprocess.run([sys.executable, "-m", "failatlas", "--db", str(db), "demo", "--out",
                            str(Path(tmp) / "demo-out")], check=True, cwd=tmp)
        else:  # the app writes nothing unless asked; a copy keeps even the read stamps off the user's file
            import shutil

            shutil.copy(db, Path(tmp) / "demo.duckdb")
            db = Path(tmp) / "demo.duckdb"
        shoot(db, args.out, args.width)


if __name__ == "__main__":
    main()

"""The app's writes in real Chromium (Debian's, driven by Playwright) against the real server (`failatlas --db DB
app`), on TRAIL's GAIA annotations imported by the real `ingest` (the app fixture's `fill_trail_store`):

- labels: an insight labelled on its view (a new name), a selection of its type's insights labelled with a category
  chosen among those the store knows, another with a second new name; then `failatlas taxonomy build` and
  `failatlas ingest file` again through the CLI: the labels are still listed (`failatlas label list`), the rebuild
  learned from them (each labelled insight sits in its label's category of the new snapshot), and the app shows
  them on the new snapshot;
- edits: rename, merge and split from the Taxonomy page, seen after a reload and again after a rebuild, which
  replays them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from failatlas.store import Store, open_store
from failatlas.taxonomy import load_taxonomy
from failatlas.taxonomy.labels import list_labels
from tests.app.fixture import fill_trail_store
from tests.app.server import ROOT
from tests.app.test_e2e import _page, _serve

BUILD = ("taxonomy", "build", "--merge-threshold", "0.75", "--assign-threshold", "0.5")  # the fixture's thresholds
LONG = 60_000  # ms: a rerun on this shared 2-core machine can take seconds


@pytest.fixture(scope="module")
def trail_template(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("labels") / "trail.duckdb"
    return db, fill_trail_store(open_store(db), _trail_file(shared_data))


def _trail_file(shared_data: Path) -> Path:
    return shared_data / "trail" / "trail_errors_gaia.jsonl"


@pytest.fixture
def trail_db(trail_template: tuple[Path, str], tmp_path: Path) -> Path:
    shutil.copy(trail_template[0], tmp_path / "trail.duckdb")
    return tmp_path / "trail.duckdb"


def _cli(db: Path, *args: str) -> str:
    """`failatlas --db DB ARGS...` in a process of its own, as a user runs it; its output."""
    env = dict(os.environ, FAILATLAS_NO_PROGRESS="1", COLUMNS="250",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("FAILATLAS_DB", None)
    done = subprocess.run([sys.executable, "-m", "failatlas", "--db", str(db), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return " ".join(done.stdout.split())


def _form(page, submit: str):  # noqa: ANN001, ANN202
    """The Streamlit form whose submit button reads `submit`."""
    return page.get_by_test_id("stForm").filter(has=page.get_by_role("button", name=submit, exact=True))


def _option(page, field, text: str) -> None:  # noqa: ANN001
    """Type `text` into a select box's filter (`field`: its input, as an element handle found before the list
    opened: while it is open, role and label lookups of the form see nothing else) and click the first option that
    shows it. A click or keystrokes that land while Streamlit re-runs the page can be lost (the list never opens):
    then the box is opened and the filter typed again, at most three times."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    # as the option shows it: the app flattens whitespace (a newline, a narrow no-break space or a thin space in a
    # statement is one space there, and typed as it is it matches no option)
    typed = " ".join(text.split())[:40]
    for attempt in range(3):
        field.click()  # the box's centre may be a chosen item's tag
        field.fill("")
        page.keyboard.type(typed)
        try:
            page.get_by_role("option").filter(has_text=typed).first.click(timeout=20_000)
            return
        except PlaywrightTimeout:
            if attempt == 2:
                raise


def _choose(page, box, text: str) -> None:  # noqa: ANN001
    """Open a select box (or multiselect), filter its options by `text` and click the first that shows it."""
    _option(page, box.locator("input").element_handle(), text)


def _pick(page, box, texts: list[str], then) -> None:  # noqa: ANN001
    """Choose these options of a multiselect, then close its list by clicking `then` (a text box of the form): an
    open list hides the rest of the page from the accessibility tree, and Escape would clear the choice. An option
    already chosen (by an earlier try whose submit was lost) is no longer offered, so it is left as it is."""
    after = then.element_handle()  # found now, as the box's input
    field = box.locator("input").element_handle()
    chosen = {" ".join((tag.get_attribute("aria-label") or "").split()) for tag in box.locator("[data-tag]").all()}
    for text in texts:
        typed = " ".join(text.split())
        if not any(typed[:40] in label for label in chosen):
            _option(page, field, text)
    after.click()


def _close_list(page) -> None:  # noqa: ANN001
    """Close a select box's list a failed try left open (it hides the rest of the page from role lookups): focus
    leaves the box (Tab), which keeps what was chosen."""
    from playwright.sync_api import expect

    if page.get_by_role("listbox").count():
        page.keyboard.press("Tab")
        expect(page.get_by_role("listbox")).to_have_count(0, timeout=10_000)


def _offered(page, field, text: str) -> None:  # noqa: ANN001
    """Type `text` into a select box's filter and expect exactly one option showing it. As in `_option`, a click or
    keystrokes landing while Streamlit re-runs the page can be lost (the list never opens): then it is tried again,
    at most three times."""
    from playwright.sync_api import expect

    for attempt in range(3):
        field.click()
        field.fill("")
        page.keyboard.type(text)
        try:
            expect(page.get_by_role("option").filter(has_text=text)).to_have_count(1, timeout=20_000)
            return
        except AssertionError:
            if attempt == 2:
                raise


def _open(page, title: str, submit: str):  # noqa: ANN001, ANN202
    """Open the expander `title` and return the form in it whose submit button reads `submit`; a click that lands
    while Streamlit re-runs the page can be lost, so it is repeated until the form shows."""
    from playwright.sync_api import expect

    for attempt in range(3):
        page.get_by_text(title, exact=False).first.click()
        try:
            expect(_form(page, submit)).to_be_visible(timeout=15_000)
            break
        except AssertionError:
            if attempt == 2:
                raise
    return _form(page, submit)


def _tab(page, name: str):  # noqa: ANN001, ANN202
    """Click the tab `name` and return its form (submit button `name`); a click that lands while Streamlit re-runs
    the page can be lost, so it is repeated until the form's field shows."""
    from playwright.sync_api import expect

    for attempt in range(3):
        page.get_by_role("tab", name=name).click()
        try:
            expect(_form(page, name).locator("input").first).to_be_visible(timeout=15_000)
            break
        except AssertionError:
            if attempt == 2:
                raise
    return _form(page, name)


def _filled(fill):  # noqa: ANN001, ANN202
    """`fill()` (which finds its form, fills it and returns it, unsubmitted), again from the start when an element
    it holds was replaced by a Streamlit rerun under it ("not attached to the DOM"), at most three times; the caller
    submits once, so an edit that must not run twice (a merge) does not."""
    from playwright.sync_api import Error as PlaywrightError

    for attempt in range(3):
        try:
            return fill()
        except PlaywrightError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _expect_said(page, text: str, timeout: int = LONG) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    expect(page.get_by_test_id("stAlertContentSuccess").filter(has_text=text).first).to_be_visible(timeout=timeout)


def _label_selection(page, texts: list[str], *, said: str, known: str | None = None,  # noqa: ANN001
                     new: str | None = None) -> None:
    """Label a selection of the open type's insights (`texts`) with a category the store knows (`known`) or a new
    name, and expect the app to say `said`. Choices or a submit that land while Streamlit re-runs the page after the
    previous submit can be lost (the form then shows empty, or says to choose insights first): the whole form is
    filled and submitted again, at most three times. A second submit of the same labels changes nothing."""
    from playwright.sync_api import expect

    def fill():  # noqa: ANN202
        _close_list(page)
        form = _form(page, "Label the selected insights")
        expect(form).to_be_visible(timeout=LONG)
        _pick(page, form.get_by_test_id("stMultiSelect"), texts, then=form.get_by_label("or a new name"))
        if known is not None:
            _choose(page, form.get_by_test_id("stSelectbox"), known)
        else:
            form.get_by_label("or a new name").fill(new or "")
        return form

    for attempt in range(3):
        _filled(fill).get_by_role("button", name="Label the selected insights").click()
        try:
            _expect_said(page, said, timeout=30_000 if attempt < 2 else LONG)
            return
        except AssertionError:
            if attempt == 2:
                raise


def _type_of(db: Path, taxonomy_id: str, insight: str) -> tuple[str, str]:
    return Store(db).query(
        "SELECT t.id, t.name FROM insight_failure_types a JOIN failure_types t ON t.taxonomy_id = a.taxonomy_id"
        " AND t.id = a.failure_type_id WHERE a.taxonomy_id = ? AND a.insight_id = ?", [taxonomy_id, insight])[0]


def _newest(db: Path) -> str:
    return Store(db).query("SELECT id FROM taxonomies ORDER BY version DESC LIMIT 1")[0][0]


@pytest.mark.slow
def test_labels_given_in_the_app_survive_a_rebuild_and_a_re_ingest(trail_db: Path, trail_template: tuple[Path, str],
                                                                  shared_data: Path) -> None:
    from playwright.sync_api import expect

    taxonomy_id = trail_template[1]
    largest = max(load_taxonomy(Store(trail_db), taxonomy_id).types, key=lambda t: t.n_insights)
    members = [r[0] for r in Store(trail_db).query(
        "SELECT i.id FROM insight_failure_types a JOIN insights i ON i.id = a.insight_id WHERE a.taxonomy_id = ?"
        " AND a.failure_type_id = ? ORDER BY i.n_occurrences DESC, a.similarity DESC NULLS LAST, i.id",
        [taxonomy_id, largest.id])]
    one, pair, last = members[0], members[1:3], members[3]
    text_of = dict(Store(trail_db).query("SELECT id, text FROM insights"))
    type_url = f"?page=drill&taxonomy={taxonomy_id}&failure_type={largest.id}"

    with contextmanager(_serve)(trail_db) as url:
        with _page() as page:
            # the insight's own view: a new name, typed
            page.goto(f"{url}/{type_url}&insight={one}", wait_until="networkidle")
            expect(page.get_by_text("Your label: none yet", exact=False)).to_be_visible(timeout=LONG)
            form = _form(page, "Label this insight")
            form.get_by_label("or a new name").fill("Answer format ignored")
            form.get_by_role("button", name="Label this insight").click()
            _expect_said(page, "Labelled 1 distinct statement as “Answer format ignored”")
            expect(page.get_by_text("Your label: Answer format ignored (given in the app", exact=False)
                   ).to_be_visible(timeout=LONG)

            # a selection of the type's insights, with a category the store knows now
            _open(page, "Label insights of this type", "Label the selected insights")
            _label_selection(page, [text_of[i] for i in pair], known="Answer format ignored",
                             said="Labelled 2 distinct statements as “Answer format ignored”")

            # another selection, another new name
            _label_selection(page, [text_of[last]], new="Tool call malformed",
                             said="Labelled 1 distinct statement as “Tool call malformed”")

        given = {r.text: (r.label, r.source) for r in list_labels(Store(trail_db))}
        assert given == {text_of[one]: ("Answer format ignored", "app"),
                         **{text_of[i]: ("Answer format ignored", "app") for i in pair},
                         text_of[last]: ("Tool call malformed", "app")}

        built = _cli(trail_db, *BUILD)
        assert "learned assignment other:" in built and "learned from 4 labelled statements" in built, built
        rebuilt = _newest(trail_db)
        assert rebuilt != taxonomy_id
        ingested = _cli(trail_db, "ingest", "file", str(_trail_file(shared_data)), "--format", "trail")
        listed = _cli(trail_db, "label", "list")
        assert "4 labelled distinct statement(s)" in listed, listed
        assert listed.count("Answer format ignored") == 3 and listed.count("Tool call malformed") == 1
        assert _cli(trail_db, *BUILD) and _newest(trail_db) == rebuilt, ingested  # nothing new: the same snapshot
        # the rebuild learned from them: each labelled insight is in its label's category
        for iid in (one, *pair):
            assert _type_of(trail_db, rebuilt, iid)[1] == "Answer format ignored"
        new_type, name = _type_of(trail_db, rebuilt, last)
        assert name == "Tool call malformed"

        with _page() as page:  # the app, on the newest snapshot (no taxonomy in the URL)
            page.goto(f"{url}/?page=drill&failure_type={new_type}&insight={last}", wait_until="networkidle")
            expect(page.get_by_text("Your label: Tool call malformed (given in the app", exact=False)
                   ).to_be_visible(timeout=LONG)
            expect(page.get_by_text(re.compile(r"^Tool call malformed · ")).first).to_be_visible(timeout=LONG)


@pytest.mark.slow
def test_rename_merge_split_in_the_app_show_after_a_reload_and_a_rebuild(trail_db: Path,
                                                                         trail_template: tuple[Path, str]) -> None:
    from playwright.sync_api import expect

    taxonomy_id = trail_template[1]
    types = sorted(load_taxonomy(Store(trail_db), taxonomy_id).types, key=lambda t: (-t.n_insights, t.id))
    renamed, kept, gone, halved = (t.id for t in types[:4])
    members = {t.id: t.n_insights for t in types}

    with contextmanager(_serve)(trail_db) as url:
        with _page() as page:
            page.goto(f"{url}/?page=taxonomy&taxonomy={taxonomy_id}", wait_until="networkidle")
            _open(page, "Edit the taxonomy: rename, merge or split types", "Rename")

            def rename():  # noqa: ANN202
                _close_list(page)
                form = _tab(page, "Rename")
                _choose(page, form.get_by_test_id("stSelectbox"), f"({renamed})")
                form.get_by_label("New name").fill("Renamed in the browser")
                return form

            _filled(rename).get_by_role("button", name="Rename").click()
            _expect_said(page, f"Rename: {renamed} “Renamed in the browser”")

            def merge():  # noqa: ANN202
                _close_list(page)
                form = _tab(page, "Merge")
                _pick(page, form.get_by_test_id("stMultiSelect"), [f"({kept})", f"({gone})"],
                      then=form.get_by_label("Name of the merged type", exact=False))
                form.get_by_label("Name of the merged type", exact=False).fill("Merged in the browser")
                return form

            _filled(merge).get_by_role("button", name="Merge").click()
            _expect_said(page, f"Merge: {kept} “Merged in the browser” "
                               f"({members[kept] + members[gone]} distinct insights)")

            def split():  # noqa: ANN202
                _close_list(page)
                form = _tab(page, "Split")
                _choose(page, form.get_by_test_id("stSelectbox"), f"({halved})")
                return form

            _filled(split).get_by_role("button", name="Split").click()
            _expect_said(page, f"Split: {halved} ")

            # after a reload: the types as edited, in the drill-down and the Taxonomy page's lists
            page.goto(f"{url}/?page=drill&taxonomy={taxonomy_id}&failure_type={renamed}", wait_until="networkidle")
            expect(page.get_by_text(re.compile(r"^Renamed in the browser · ")).first).to_be_visible(timeout=LONG)
            page.goto(f"{url}/?page=drill&taxonomy={taxonomy_id}&failure_type={kept}", wait_until="networkidle")
            expect(page.get_by_text(re.compile(r"^Merged in the browser · ")).first).to_be_visible(timeout=LONG)
            page.goto(f"{url}/?page=taxonomy&taxonomy={taxonomy_id}", wait_until="networkidle")
            _open(page, "Edit the taxonomy: rename, merge or split types", "Rename")
            box = _tab(page, "Split").get_by_test_id("stSelectbox").locator("input").element_handle()
            _offered(page, box, f"({kept})")  # offered
            box.fill("")
            box.type(f"({gone})")  # merged away: not offered
            expect(page.get_by_role("option").filter(has_text=f"({gone})")).to_have_count(0, timeout=LONG)

        edited = {t.id: t for t in load_taxonomy(Store(trail_db), taxonomy_id).types}
        parts = [t for t in edited.values() if t.definition.startswith("Part ")]
        assert len(parts) == 2 and sum(t.n_insights for t in parts) == members[halved]

        built = _cli(trail_db, *BUILD)
        assert built.count(": applied to") == 3, built  # every edit replayed on the new snapshot
        rebuilt = _newest(trail_db)
        assert rebuilt != taxonomy_id
        names = {t.name: t.id for t in load_taxonomy(Store(trail_db), rebuilt).types}
        assert {"Renamed in the browser", "Merged in the browser"} <= set(names)
        with _page() as page:  # the newest snapshot, as the app opens it
            for name in ("Renamed in the browser", "Merged in the browser"):
                page.goto(f"{url}/?page=drill&failure_type={names[name]}", wait_until="networkidle")
                expect(page.get_by_text(re.compile(rf"^{name} · ")).first).to_be_visible(timeout=LONG)

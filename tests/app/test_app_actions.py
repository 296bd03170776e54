"""The app's writes (`failatlas.appdata.actions`) on the real fixture store: labels and taxonomy edits through the
CLI's functions, hostile names refused or shown as text, a busy store said in one line with nothing written, the
forms of the Drill-down and Taxonomy pages driven through Streamlit's testing API, and no other module of the
app that writes."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from failatlas.appdata import actions
from failatlas.store import Store
from failatlas.taxonomy import load_taxonomy
from failatlas.taxonomy.edits import load_edits
from failatlas.taxonomy.labels import list_labels
from tests.app.test_pages import plain, render, texts
from tests.taxonomy.fill import insight_id

ROOT = Path(__file__).resolve().parents[2]
TORCH = ("implementation", "ModuleNotFoundError: No module named 'torchvision' when running train.py")
SCIPY = ("implementation", "Missing module scipy: the evaluation script crashed at import time")


def _labels(db: Path) -> dict[str, tuple[str, str]]:
    return {r.text: (r.label, r.source) for r in list_labels(Store(db))}


def test_labels_are_written_by_the_cli_functions_and_removed(app_db: Path, taxonomy_id: str) -> None:
    torch = insight_id(*TORCH)
    done = actions.label_insights(str(app_db), [torch], "  Missing   package ")
    assert done.ok and "1 distinct statement" in done.message and "Missing package" in done.message
    assert _labels(app_db) == {TORCH[1]: ("Missing package", "app")}  # whitespace collapsed, given in the app
    whole = actions.label_type(str(app_db), taxonomy_id, "implementation/T01", "Import failure")
    assert whole.ok and "4 distinct statements" in whole.message, whole.message
    assert {label for label, _ in _labels(app_db).values()} == {"Import failure"}  # relabelled: the newest wins
    assert len(_labels(app_db)) == 4
    gone = actions.remove_labels(str(app_db), [torch])
    assert gone.ok and gone.message == "Removed 1 label."
    assert TORCH[1] not in _labels(app_db) and len(_labels(app_db)) == 3


@pytest.mark.parametrize(("label", "says"), [
    ("", "non-empty"),
    ("x" * 201, "at most 200"),
    ("bell\x07", "control characters"),
    ("lone \udcff", "surrogates"),
])
def test_bad_labels_are_refused_in_one_line_and_nothing_is_written(app_db: Path, label: str, says: str) -> None:
    out = actions.label_insights(str(app_db), [insight_id(*TORCH)], label)
    assert not out.ok and out.message.startswith("Nothing was written") and says in out.message
    assert "\n" not in out.message and _labels(app_db) == {}
    unknown = actions.label_insights(str(app_db), ["nope", insight_id(*TORCH)], "Fine")
    assert not unknown.ok and "no insight 'nope'" in unknown.message and _labels(app_db) == {}  # all or nothing


def test_markup_in_a_label_is_stored_as_written_and_shown_as_text(app_db: Path, taxonomy_id: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = "![x](http://127.0.0.1:9/a.png) <b>bold</b> :red[red]"
    assert actions.label_insights(str(app_db), [insight_id(*TORCH)], hostile).ok
    at = render(app_db, monkeypatch, page="drill", taxonomy=taxonomy_id, failure_type="implementation/T01",
                insight=insight_id(*TORCH))
    shown = texts(at)
    assert f"Your label: {hostile} (given in the app" in shown  # the characters, no image, tag or colour
    table = next(d.value for d in at.dataframe if "your_label" in d.value.columns)
    assert table.set_index("insight_id").loc[insight_id(*TORCH), "your_label"] == hostile


def test_a_busy_store_is_said_and_nothing_is_written(app_db: Path, taxonomy_id: str) -> None:
    # Another process holds a read-only connection: DuckDB refuses a writer until it closes.
    holder = subprocess.Popen([sys.executable, "-m", "tests.app.writer", str(app_db), "hold", "60"], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        out = actions.label_insights(str(app_db), [insight_id(*TORCH)], "Missing package", lock_timeout=2)
        edit = actions.rename_type(str(app_db), taxonomy_id, "implementation/T01", "Never", lock_timeout=2)
        assert time.monotonic() - started < 20
    finally:
        holder.terminate()
        holder.wait(timeout=30)
    for refused in (out, edit):
        assert not refused.ok and refused.message.startswith("The store is busy"), refused.message
        assert "Nothing was written" in refused.message
    assert _labels(app_db) == {} and load_edits(Store(app_db)) == []


def test_rename_merge_split_write_recorded_edits(app_db: Path, taxonomy_id: str) -> None:
    db = str(app_db)
    renamed = actions.rename_type(db, taxonomy_id, "implementation/T01", "  Package   not installed ",
                                  "Imports that fail.\nOne per line.")
    assert renamed.ok and "implementation/T01 “Package not installed”" in renamed.message, renamed.message
    merged = actions.merge_types(db, taxonomy_id, ["design/T01", "design/T02"], "Plan lacks a control")
    assert merged.ok and "design/T01 “Plan lacks a control” (5 distinct insights)" in merged.message
    split = actions.split_type(db, taxonomy_id, "implementation/T02", 2)
    assert split.ok and split.message.count("“") == 2 and "Saved as edit 3" in split.message, split.message
    types = {t.id: t for t in load_taxonomy(Store(db), taxonomy_id).types}
    assert types["implementation/T01"].name == "Package not installed"
    assert types["implementation/T01"].definition == "Imports that fail.\nOne per line."
    assert "design/T02" not in types and types["design/T01"].n_insights == 5
    assert [e.action for e in load_edits(Store(db))] == ["rename", "merge", "split"]

    for bad in (actions.rename_type(db, taxonomy_id, "implementation/T01", "tab\there\x1b[31m"),
                actions.rename_type(db, taxonomy_id, "implementation/T01", "   "),
                actions.merge_types(db, taxonomy_id, ["implementation/T01"]),
                actions.merge_types(db, taxonomy_id, ["implementation/T01", "design/T01"]),
                actions.split_type(db, taxonomy_id, "implementation/T01", 1),
                actions.rename_type(db, taxonomy_id, "implementation/T99", "Nowhere")):
        assert not bad.ok and bad.message.startswith("Nothing was written"), bad.message
    assert len(load_edits(Store(db))) == 3


def _said(at: AppTest) -> str:
    """The success and error messages on the page, as read."""
    return "\n".join(plain(m.value) for m in [*at.success, *at.error])


def _submit(at: AppTest, label: str) -> AppTest:
    (button,) = [b for b in at.button if b.label == label]
    return button.click().run()


def test_the_drill_down_labels_an_insight_a_selection_and_a_type(app_db: Path, taxonomy_id: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    torch, scipy = insight_id(*TORCH), insight_id(*SCIPY)
    at = render(app_db, monkeypatch, page="drill", taxonomy=taxonomy_id, failure_type="implementation/T01",
                insight=torch)
    assert "Your label: none yet" in texts(at)
    at.text_input(key=f"label_insight_{torch}_new").input("Missing package")
    _submit(at, "Label this insight")
    assert not at.exception, at.exception
    assert _labels(app_db) == {TORCH[1]: ("Missing package", "app")}
    assert "Labelled 1 distinct statement as “Missing package”" in _said(at)
    assert "Your label: Missing package (given in the app" in texts(at)

    # a selection of the type's insights, with the category chosen among those the store knows
    key = "label_type_implementation/T01"
    assert "Missing package" in at.selectbox(key=f"{key}_existing").options
    at.multiselect(key=f"{key}_pick").select(scipy)
    at.selectbox(key=f"{key}_existing").set_value("Missing package")
    _submit(at, "Label the selected insights")
    assert _labels(app_db)[SCIPY[1]] == ("Missing package", "app")
    table = next(d.value for d in at.dataframe if "your_label" in d.value.columns).set_index("insight_id")
    assert table.loc[scipy, "your_label"] == "Missing package"
    # the form stays open for the next selection after its outcome was shown, through later reruns too (its
    # expander closed under the person using it once `expanded` changed from one rerun to the next)
    for _ in range(2):
        at.run()
        opened = [e.proto.expanded for e in at.expander if e.label.startswith("Label insights of this type")]
        assert opened == [True]

    at.text_input(key=f"{key}_new").input("Import failure")  # a typed name wins over a chosen one
    _submit(at, "Label the whole type (4 distinct insights)")
    assert sorted(label for label, _ in _labels(app_db).values()) == ["Import failure"] * 4
    at.button(key=f"unlabel_{torch}").click().run()
    assert TORCH[1] not in _labels(app_db) and "Removed 1 label." in _said(at)

    at.button(key="drill_edit_implementation/T01").click().run()  # the type's edits: on the Taxonomy page
    assert at.query_params["page"] == "taxonomy" and at.query_params["failure_type"] == "implementation/T01"
    assert at.selectbox(key="tx_edit_rename_type").value == "implementation/T01"


def test_the_taxonomy_page_renames_merges_and_splits(app_db: Path, taxonomy_id: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    at = render(app_db, monkeypatch, page="taxonomy")
    _submit(at, "Rename")
    assert "Nothing was written: choose a failure type first." in _said(at) and load_edits(Store(app_db)) == []
    at.selectbox(key="tx_edit_rename_type").set_value("implementation/T01")
    at.text_input(key="tx_edit_rename_name").input("Package not installed")
    _submit(at, "Rename")
    shown = [n for d in at.dataframe if "failure_type" in d.value.columns for n in d.value["failure_type"]]
    assert "Package not installed" in shown
    at.multiselect(key="tx_edit_merge_types").select("design/T01").select("design/T02")
    _submit(at, "Merge")
    assert "design/T02" not in at.selectbox(key="tx_edit_split_type").options
    at.selectbox(key="tx_edit_split_type").set_value("implementation/T02")
    _submit(at, "Split")
    assert re.search(r"Split: implementation/T02 .*implementation/T0\d", _said(at)), _said(at)
    assert [e.action for e in load_edits(Store(app_db))] == ["rename", "merge", "split"]
    at.multiselect(key="tx_edit_merge_types").select("implementation/T01").select("design/T01")
    _submit(at, "Merge")
    assert "Nothing was written" in _said(at)  # two phases: refused, said, not raised


def test_no_module_of_the_app_but_actions_writes() -> None:
    writers = ("label_insights(", "label_type(", "label_file(", "remove_labels(", "edit_taxonomy(", ".write(",
               "open_store(", ".migrate(", "read_only=False", "INSERT ", "DELETE ", "UPDATE ")
    sources = [ROOT / "app.py", *sorted((ROOT / "failatlas" / "appdata").rglob("*.py"))]
    for source in sources:
        if source.name == "actions.py":
            continue
        text = re.sub(r"\bactions\.\w+", "", source.read_text())  # calls of the actions are what pages may do
        calls = [w for w in writers if w in text]
        assert not calls, f"{source.name} calls {calls}"
    text = (ROOT / "failatlas" / "appdata" / "actions.py").read_text()
    assert "labels.label_insights(" in text and "edit_taxonomy(" in text  # the CLI's functions, not its own SQL
    assert "INSERT" not in text and "DELETE" not in text


def test_messages_show_commands_as_code_and_names_as_text() -> None:
    """Issue 42: a success message showed its backticks ("The next `taxonomy build` learns from it"); a name in
    it still renders as the text it is, never as a link or markup."""
    from markdown_it import MarkdownIt

    from failatlas.appdata.pages.common import md_message

    message = ("Labelled 2 distinct statements as “[x](https://e.com) *b* `c`”. The next `taxonomy build` learns"
               " from it.")
    html = MarkdownIt("commonmark").render(md_message(message))
    assert "<code>taxonomy build</code>" in html and "<a" not in html and "<em>" not in html
    assert plain(md_message(message)) == message.replace("`", "")

"""Exports of a taxonomy whose names, definitions, criteria and insight texts are hostile (a label, a seed file,
an imported row or an agent wrote them): the Markdown holds no control character and no structure of their making
(heading, HTML, link), the CSV no live spreadsheet formula, and the terminal prints ':x:' as it is."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.store import open_store
from failatlas.taxonomy import BuildParams, export_taxonomy
from failatlas.taxonomy import run as build
from failatlas.taxonomy.drilldown import drilldown_files
from tests.taxonomy.mini import fill_mini_suite

OSC52 = "\x1b]52;c;ZXZpbA==\x07"
HEADING = "a\n\n# INJECTED"
HTML = "<script>x</script>"
FORMULA = '=HYPERLINK("http://e")'
EMOJI = "root:x:0:0"
# type names, one each (the mini-suite has six types)
HOSTILE = (FORMULA, "\x1b+cmd|' /C calc'!A0", "@SUM(A1)", "-2+3", HEADING, f"{HTML}{OSC52}clip {EMOJI} :skull:")

# C0 and C1 controls; the CSV may keep newline and tab inside a quoted cell
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CSV_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):  # noqa: ANN001, ANN201
    """The mini-suite's taxonomy with every type, category, definition, criterion, example and insight text made
    hostile, and one run's agent named 'root:x:0:0' (built once: the tests only read it)."""
    mini_store = open_store(tmp_path_factory.mktemp("hostile") / "store.duckdb")
    fill_mini_suite(mini_store)
    taxonomy = build(mini_store, BuildParams())
    types = [r[0] for r in mini_store.query("SELECT id FROM failure_types WHERE taxonomy_id = ? ORDER BY id",
                                            [taxonomy.id])]
    assert len(types) == len(HOSTILE)
    with mini_store.write() as conn:
        for k, type_id in enumerate(types):
            bad = HOSTILE[k]
            conn.execute(
                "UPDATE failure_types SET name = ?, definition = ?, inclusion_criteria = ?, examples = ? "
                "WHERE taxonomy_id = ? AND id = ?",
                [bad, f"{HEADING} {OSC52} {HTML} [x](javascript:alert(1))",
                 json.dumps(["# INJECTED", "1. x\n- y", HTML, OSC52]),
                 json.dumps([{"insight_id": "i-1", "text": f"{HEADING}{HTML}{OSC52}", "similarity": 0.5}]),
                 taxonomy.id, type_id])
        conn.execute("UPDATE failure_categories SET name = ? WHERE taxonomy_id = ?", [FORMULA + OSC52,
                                                                                       taxonomy.id])
        for k, (insight,) in enumerate(mini_store.query("SELECT id FROM insights ORDER BY id")):
            conn.execute("UPDATE insights SET text = ? WHERE id = ?", [f"{HOSTILE[k % len(HOSTILE)]} #{k}", insight])
        conn.execute("UPDATE runs SET agent = ? WHERE id = 'r1'", [f"{EMOJI} {HEADING}{OSC52}"])
        conn.execute("UPDATE insight_sources SET agent = ? WHERE run_id = 'r1'", [f"{EMOJI} {HEADING}{OSC52}"])
    return mini_store, taxonomy.id, types


def _outside_code_spans(text: str) -> str:
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)


def assert_inert_markdown(text: str) -> None:
    controls = _CONTROLS.findall(text.replace("\n", ""))
    assert not controls, controls
    # no heading, quote or list item of the data's making: '# INJECTED' stays inside the line it came in
    assert not re.search(r"^\s*(?:(?:[-*+>]|\d+[.)])\s+)*#{1,6}\s+INJECTED", text, re.M), text
    assert not re.search(r"^\s*(?:[-*+]\s+)+(?:[-*+>]|\d+[.)])\s", text, re.M), text  # no nested item of theirs
    plain = _outside_code_spans(text)
    assert "<" not in plain and ">" not in plain  # no HTML: '&lt;script&gt;' shows as '<script>'
    assert "](" not in plain  # no link


def assert_safe_csv(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    for row in rows:
        for cell in row:
            assert not _CSV_CONTROLS.search(cell), cell
            assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r") or _NUMBER.fullmatch(cell), cell
    return rows


def test_failure_types_md_and_prevalence_md_are_inert(hostile, tmp_path):
    store, taxonomy_id, _ = hostile
    out = tmp_path / "exp"
    export_taxonomy(store, taxonomy_id, out, formats=("md", "csv"))
    appendix = (out / "failure_types.md").read_text()
    assert_inert_markdown(appendix)
    assert "&lt;script&gt;x&lt;/script&gt;" in appendix and "]52;c;ZXZpbA==clip" in appendix
    assert "- \\# INJECTED" in appendix and "- 1\\. x - y" in appendix  # criteria: one line, no block
    table = (out / "prevalence.md").read_text()
    assert_inert_markdown(table)
    cells = {len(re.split(r"(?<!\\)\|", line)) for line in table.splitlines() if line.startswith("|")}
    assert len(cells) == 1, table  # a name's '|' or line break splits no row


def test_prevalence_csv_has_no_live_formula(hostile, tmp_path):
    store, taxonomy_id, _ = hostile
    out = tmp_path / "exp"
    export_taxonomy(store, taxonomy_id, out, formats=("csv",))
    rows = assert_safe_csv((out / "prevalence.csv").read_text())
    header = rows[0]
    names = [r[header.index("failure_type")] for r in rows[1:]]
    assert "'" + FORMULA in names and "'-2+3" in names and "'@SUM(A1)" in names and "'+cmd|' /C calc'!A0" in names
    assert HEADING in names  # a line break stays (the cell is quoted), the text is kept
    shares = [float(r[header.index("share")]) for r in rows[1:]]  # numbers are still numbers
    assert all(0 < s <= 1 for s in shares)


def test_drilldown_md_and_csv_are_inert(hostile):
    store, taxonomy_id, types = hostile
    every = b""
    for type_id in types[::2]:  # half of them, every hostile insight text met at least once
        files = drilldown_files(store, type_id, taxonomy_id, formats=("md", "csv"))
        stem = "drilldown-" + type_id.replace("/", "-")
        markdown = files[f"{stem}.md"].decode()
        assert_inert_markdown(markdown)
        assert markdown.startswith("# ")
        rows = assert_safe_csv(files[f"{stem}.csv"].decode())
        assert len(rows) > 1
        every += b"".join(files.values())
    assert b"&lt;script&gt;" in every and b"'=HYPERLINK" in every and b"\x1b" not in every


def test_the_terminal_shows_emoji_codes_as_text(hostile):
    store, taxonomy_id, _ = hostile
    result = CliRunner().invoke(app, ["--db", str(Path(store.path)), "taxonomy", "show", taxonomy_id],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "root:x:0:0 :skull:" in result.output and "❌" not in result.output and "💀" not in result.output
    assert "\\x1b]52;c;ZXZpbA==\\x07clip" in result.output and "\x1b" not in result.output  # as before: shown

"""What FailAtlas writes for a reader (Markdown, CSV, the terminal) from text it did not write itself (imported
files, labels, seeds, agents): no control character, no Markdown structure or HTML of the text's making, no live
spreadsheet formula, no emoji code rewritten. The writers are called directly with hostile strings."""

from __future__ import annotations

import csv
import io
import re

import pytest

from failatlas.core.cli import console, err_console
from failatlas.core.tables import code_span, csv_cell, one_line, to_csv, to_markdown

OSC52 = "\x1b]52;c;ZXZpbA==\x07"
HEADING = "a\n\n# INJECTED"
HTML = "<script>x</script>"
FORMULA = '=HYPERLINK("http://e")'
EMOJI = "root:x:0:0"
CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("mode", ["cell", "line"])
def test_one_line_markdown_is_inert(mode):
    for text in (OSC52, HEADING, HTML, FORMULA, EMOJI, "\x9b31m\x85x", "x](javascript:alert(1))"):
        out = one_line(text, markdown=mode)
        assert not CONTROLS.search(out) and "\n" not in out
        assert "<" not in out and ">" not in out and "](" not in out
    assert one_line(HTML, markdown=mode) == "&lt;script&gt;x&lt;/script&gt;"
    assert one_line(HEADING, markdown=mode) == "a # INJECTED"
    assert one_line("a|b", markdown=mode) == r"a\|b"
    assert one_line(r"a\|b", markdown=mode) == r"a\\\|b"  # a backslash of the text's cannot undo the escape
    assert one_line("&lt;b&gt;", markdown=mode) == "&amp;lt;b&amp;gt;"  # shown as written, not as '<b>'
    assert one_line(OSC52, markdown=mode) == "]52;c;ZXZpbA=="
    assert one_line(EMOJI, markdown=mode) == EMOJI and one_line("C:\\Users", markdown=mode) == "C:\\Users"


def test_one_line_markdown_line_opens_no_block():
    for text, out in [("# INJECTED", r"\# INJECTED"), ("> quote", "&gt; quote"), ("- item", r"\- item"),
                      ("* item", r"\* item"), ("+ item", r"\+ item"), ("12. item", r"12\. item"),
                      ("3) item", r"3\) item"), ("```sh", r"\```sh"), ("~~~", r"\~~~"), ("___", r"\___"),
                      ("===", r"\==="), ("[x]: http://e", r"\[x]: http://e"), ("| a | b |", r"\| a \| b \|"),
                      ("\n\n  # INJECTED", r"\# INJECTED"), ("plain text", "plain text")]:
        assert one_line(text, markdown="line") == out, text
    assert one_line("-0.5", markdown="cell") == "-0.5"  # a number in a table cell stays as it is
    assert one_line(HEADING) == "a # INJECTED" and one_line(HTML) == HTML  # without `markdown`: as before
    with pytest.raises(ValueError, match="markdown"):
        one_line("x", markdown="html")


def test_code_span_cannot_be_closed_by_its_text():
    assert code_span("r1") == "`r1`"
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x`` y") == "``` `x`` y ```"
    assert code_span(f"{OSC52}{HEADING}") == "`]52;c;ZXZpbA==a # INJECTED`"
    assert code_span("") == ""


def test_markdown_table_cells_are_inert():
    text = to_markdown(["agent", "score"], [[OSC52 + HEADING, -0.5], [HTML + "|x", 3], [FORMULA, None]])
    lines = text.splitlines()
    assert len(lines) == 5 and not CONTROLS.search(text.replace("\n", ""))
    assert all(len(re.split(r"(?<!\\)\|", line)) == 4 for line in lines)  # no cell split by the text
    assert "<" not in text and "INJECTED" in lines[2] and not any(ln.startswith("#") for ln in lines)
    assert lines[2] == "| ]52;c;ZXZpbA==a # INJECTED | -0.50 |"


def test_csv_cells_cannot_start_a_formula_and_numbers_stay_numbers():
    for text in (FORMULA, "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\r=1", "\x1b=1", "-"):
        assert csv_cell(text).startswith("'"), text
    assert csv_cell(FORMULA) == "'" + FORMULA and csv_cell("\x1b=1") == "'=1"
    for value in (-0.5, -3, 0, 1.5e-9, "-0.5", "-3", "+1e5", ".5", "plain", EMOJI, "a\nb\tc", ""):
        assert csv_cell(value) == value, value
    assert csv_cell(OSC52 + "x") == "]52;c;ZXZpbA==x" and csv_cell("a\x00\x85b\r\nc") == "ab\nc"
    assert csv_cell(None) is None


def test_csv_table_is_safe_to_open_in_a_spreadsheet():
    text = to_csv(["agent", "score", "n"], [[FORMULA, -0.5, -3], [OSC52 + "@x", float("nan"), None],
                                            ["-1", 0.25, 2], ["a\nb", 1.0, 1]])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [["agent", "score", "n"], ["'" + FORMULA, "-0.5", "-3"], ["]52;c;ZXZpbA==@x", "", ""],
                    ["-1", "0.25", "2"], ["a\nb", "1.0", "1"]]
    assert "\x1b" not in text and "\x07" not in text


def test_the_consoles_print_emoji_codes_as_text():
    for c in (console, err_console):
        with c.capture() as captured:
            c.print(f"{EMOJI} :skull: :x: {OSC52}")
        out = captured.get()
        assert f"{EMOJI} :skull: :x:" in out and "❌" not in out and "💀" not in out
        assert "\\x1b]52;c;ZXZpbA==\\x07" in out and "\x1b" not in out  # escapes still shown, not sent


def test_report_markdown_and_csv_are_inert(store, tmp_path):
    from failatlas.bench_core.scoring.report import report_table, write_report
    from tests.taxonomy.mini import fill_mini_suite

    fill_mini_suite(store)
    with store.write() as conn:
        conn.execute("UPDATE runs SET agent = ? WHERE agent = (SELECT min(agent) FROM runs)", [FORMULA + OSC52])
    notes = [f"{HEADING}{OSC52}: 1 run(s)", f" - {HTML}", "# INJECTED"]
    paths = write_report(report_table(store, by="agent"), "agent", tmp_path / "report", notes=notes)
    markdown = next(p for p in paths if p.suffix == ".md").read_text()
    assert not CONTROLS.search(markdown.replace("\n", "")) and "<script>" not in markdown
    assert not re.search(r"^\s*(?:-\s+)*#+\s+INJECTED", markdown, re.M)
    assert "- a # INJECTED]52;c;ZXZpbA==: 1 run(s)" in markdown and "  - \\- &lt;script&gt;" in markdown
    rows = list(csv.DictReader(next(p for p in paths if p.suffix == ".csv").open()))
    assert "'" + FORMULA + "]52;c;ZXZpbA==" in {r["agent"] for r in rows}


BIDI = "\u202e\u2066\u2067\u2068\u2069\u202a\u202b\u202c\u202d\u200e\u200f\u061c"


def test_bidirectional_controls_reach_no_table_and_show_escaped_on_the_terminal():
    """Trojan Source: a right-to-left override (U+202E) or isolate in an agent's or an imported statement would
    reorder what a reader sees around it. Markdown, CSV and LaTeX cells drop every bidirectional control; the
    terminal shows each as \\uNNNN."""
    from failatlas.core.tables import latex_cell

    text = "=cmd" + BIDI + "|x"
    for out in (one_line(text), one_line(text, markdown="cell"), csv_cell(BIDI + "=1+1"), latex_cell(text),
                to_markdown(["a"], [[text]]), to_csv(["a"], [[BIDI + "-2+3"]])):
        assert not any(ch in out for ch in BIDI), repr(out)
    assert csv_cell(BIDI + "=1+1") == "'=1+1"  # a control before '=' hides no formula
    assert latex_cell("a\u202eb") == "ab"
    shown = console.render_str("x\u202ey\u2066z")
    assert shown.plain == "x\\u202ey\\u2066z"
    assert "\u05e9\u05dc\u05d5\u05dd" in one_line("\u05e9\u05dc\u05d5\u05dd \u202e")  # right-to-left text itself stays

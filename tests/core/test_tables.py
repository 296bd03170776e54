"""The generic tables (`failatlas.core.tables`: the task-validation and score reports) keep each row on one line
whatever a cell holds: a failure detail with line breaks (a traceback), a blank line, or an escape sequence an
agent or a task file wrote. Markdown rows stay rows, and the LaTeX table compiles."""

from __future__ import annotations

from pathlib import Path

from failatlas.core.tables import one_line, to_latex, to_markdown
from tests.paper_latex import compile_latex

CELLS = [["Traceback (most recent call last):\n  File \"x.py\"\n\nValueError: bad | worse", "\x1b[31mred\x1b[0m\x07"],
         ["ok", "tab\there"]]


def test_one_line_collapses_whitespace_and_drops_controls():
    assert one_line("a\n\n b\tc\x1b[2J\x9bd\x7f") == "a b c[2Jd"
    assert one_line(" plain ") == "plain"


def test_markdown_keeps_one_line_per_row():
    lines = to_markdown(["detail", "note"], CELLS).splitlines()
    assert len(lines) == 2 + len(CELLS)
    assert lines[2] == '| Traceback (most recent call last): File "x.py" ValueError: bad \\| worse | [31mred[0m |'
    assert not any(c for line in lines for c in line if ord(c) < 32 or 0x7f <= ord(c) <= 0x9f)


def test_latex_with_such_cells_compiles(tmp_path: Path):
    tex = tmp_path / "table.tex"
    tex.write_text(to_latex(["detail", "note"], [["line one\n\nline two", "\x1b[31mred\x07"], ["a | b", "t\tu"]],
                            caption="A\n\ncaption"))
    assert "\n\n" not in tex.read_text() and "\x1b" not in tex.read_text()
    compile_latex(tex, tmp_path, ["booktabs", "[T1]{fontenc}"])

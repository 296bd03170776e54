"""Text that a task file, an imported file or an agent wrote reaches the terminal without its control characters:
an escape sequence in a question or a conclusion could clear or retitle the reader's terminal, or write its
clipboard (OSC 52). The CLI's consoles print each as a visible \\xNN; their own styles stay."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

from typer.testing import CliRunner

from failatlas.core.cli import SafeConsole

HOSTILE = "x\x1b]52;c;cm0gLXJmIH4=\x07 \x1b[2J\x1b]0;owned\x1b\\ \x9b31m \x7f y"
SUITE = Path(__file__).resolve().parents[1] / "bench_core" / "suites" / "env" / "typo-similarity"


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f})


def test_the_console_prints_controls_visibly_and_keeps_its_own_styles():
    from rich.table import Table

    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=120, highlight=False)
    table = Table("what", "text")
    table.add_row("cell", HOSTILE)
    console.print(f"[bold]conclusion:[/] {HOSTILE}", table)
    printed = out.getvalue()
    assert "\x1b[1m" in printed  # the console's own bold is still sent, and nothing else raw
    assert set(re.findall(r"\x1b[^a-zA-Z]*[a-zA-Z]?", printed)) == {"\x1b[1m", "\x1b[0m"}
    assert _raw_controls(printed.replace("\x1b[1m", "").replace("\x1b[0m", "")) == []
    assert "\\x1b]52;c;cm0gLXJmIH4=" in printed and "\\x9b31m" in printed and "\\x7f" in printed
    # a table sized on what is shown: the cell's text is whole on one line
    assert "\\x1b[2J\\x1b]0;owned\\x1b\\ \\x9b31m \\x7f y" in printed


def test_a_task_files_escape_sequences_never_reach_the_terminal(tmp_path):
    from failatlas.cli import app

    folder = tmp_path / "tasks" / "typo"
    shutil.copytree(SUITE, folder)
    text = (folder / "task.yaml").read_text()
    text = text.replace("id: env-typo-similarity", "id: env-typo-hostile")
    text = re.sub(r"question: >-\n(  .*\n)+", 'question: "\\\\e]52;c;cm0=\\\\a\\\\e[2J For 200 random words?"\n', text)
    (folder / "task.yaml").write_text(text)
    db = str(tmp_path / "s.duckdb")
    runner = CliRunner()
    imported = runner.invoke(app, ["--db", db, "tasks", "import", str(folder)])
    assert imported.exit_code == 0, imported.output
    for args in (["tasks", "show", "env-typo-hostile"], ["tasks", "list"]):
        shown = runner.invoke(app, ["--db", db, *args])
        assert shown.exit_code == 0, shown.output
        assert _raw_controls(shown.output) == [], args
    shown = runner.invoke(app, ["--db", db, "tasks", "show", "env-typo-hostile"])
    assert "\\x1b]52;c;cm0=" in "".join(shown.output.split())


def test_the_clis_console_reads_columns_when_it_prints_not_when_it_was_made(monkeypatch):
    """The CLI's consoles are made at import; a command run later in the same process (a CliRunner, a notebook)
    prints at the width its environment says then (two tests failed by which test of a worker imported first)."""
    monkeypatch.setenv("COLUMNS", "50")
    made_narrow = SafeConsole(file=io.StringIO())
    fixed = SafeConsole(file=io.StringIO(), width=70)
    monkeypatch.setenv("COLUMNS", "200")
    assert made_narrow.width == 200 and fixed.width == 70
    made_narrow.print("x" * 150)
    assert made_narrow.file.getvalue() == "x" * 150 + "\n"

"""`failatlas bench report`: tables per agent from the scored mini-suite, in three formats that agree, LaTeX that
compiles, and the command-line entry point."""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.scoring.report import report_table, write_report
from failatlas.cli import app
from failatlas.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_report_formats_agree_and_latex_compiles(scored_mini_store: Path, tmp_path: Path):
    table = report_table(Store(scored_mini_store), by="agent", n_boot=200)
    md, csv_path, tex = write_report(table, "agent", tmp_path)
    rows = {r["agent"]: r for r in csv.DictReader(csv_path.open())}
    assert float(rows["gold"]["M·C·D·I·E"]) == 1.0 and float(rows["null"]["D"]) == 0.0
    md_lines = {line.split("|")[1].strip(): line for line in md.read_text().splitlines()[2:]}
    for agent, row in rows.items():
        assert f"{float(row['E']):.2f} [" in md_lines[agent]
    assert tex.read_text().count("\\\\") == len(rows) + 1  # header + one line per agent
    doc = tmp_path / "doc.tex"
    doc.write_text("\\documentclass{article}\\usepackage{booktabs}\\usepackage{amssymb}\\usepackage{graphicx}"
                   "\\begin{document}\\input{" + tex.with_suffix("").name + "}\\end{document}\n")
    if shutil.which("pdflatex"):
        proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:]
    else:
        from pylatexenc.latexwalker import LatexWalker

        LatexWalker(tex.read_text(), tolerant_parsing=False).get_latex_nodes()


def test_report_cli_with_pass_at_k(scored_mini_store: Path, tmp_path: Path):
    result = CliRunner().invoke(app, ["--db", str(scored_mini_store), "bench", "report", "--by", "fault", "--k", "1",
                                      "--out", str(tmp_path), "--n-boot", "100"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report_by_fault.csv").read_text().count("\n") == 10  # header + 9 agents
    header = (tmp_path / "report_by_fault.csv").read_text().splitlines()[0]
    assert "pass@1" in header and "pass^1" in header

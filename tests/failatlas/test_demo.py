"""`failatlas demo` on the mini-suite: the mining half runs on real runs (those of the session's scored store),
builds a taxonomy per phase, and writes tables that compile and figures that render."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from failatlas.demo import run_demo
from failatlas.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_demo_mines_the_mini_suite_runs(mini_store_copy: Path, tmp_path: Path):
    lines: list[str] = []
    store = Store(mini_store_copy)
    result = run_demo(store, out_dir=tmp_path / "out", sandbox="docker", say=lines.append)
    assert any(line.startswith("[8/8") for line in lines)
    assert result.runs == 45 and result.insights > 10 and result.taxonomy_id
    phases = {p for (p,) in store.query("SELECT DISTINCT phase FROM failure_types WHERE taxonomy_id = ?",
                                        [result.taxonomy_id])}
    assert {"implementation", "execution", "conclusion", "monitor"} <= phases
    missing = store.query(
        "SELECT count(*) FROM insight_sources s JOIN runs r ON r.id = s.run_id WHERE r.agent = 'gold'")[0][0]
    assert missing == 0, "the reference agent produced no failure insight"
    names = {p.name for p in result.files}
    assert {"report_by_agent.tex", "prevalence.tex", "prevalence.csv", "funnel.png", "agent_heatmap.pdf"} <= names
    for png in (p for p in result.files if p.suffix == ".png"):
        assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 5_000
    tex = next(p for p in result.files if p.name == "prevalence.tex")
    if shutil.which("pdflatex"):
        (tmp_path / "doc.tex").write_text("\\documentclass{article}\\usepackage{booktabs}\\usepackage{graphicx}"
                                          "\\begin{document}\\resizebox{\\linewidth}{!}{\\input{" + tex.as_posix()
                                          + "}}\\end{document}\n")
        proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:]
    again = run_demo(store, out_dir=tmp_path / "out", sandbox="docker", say=lines.append)
    assert again.runs == 45, "re-running the demo does only what is missing"

"""`failatlas demo` on the mini-suite: the mining half runs on real runs (those of the session's scored store),
builds a taxonomy per phase, and writes tables that compile and figures that render."""

from __future__ import annotations

from pathlib import Path

import pytest

from failatlas.demo import run_demo
from failatlas.store import Store
from tests.paper_latex import compile_latex, header_packages

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
    for tex in (p for p in result.files if p.suffix == ".tex"):  # each as a paper would \input it
        compile_latex(tex, tmp_path, header_packages(tex))
    again = run_demo(store, out_dir=tmp_path / "out", sandbox="docker", say=lines.append)
    assert again.runs == 45, "re-running the demo does only what is missing"

"""`failatlas demo` on the mini-suite: the mining half runs on real runs (those of the session's scored store),
builds a taxonomy per phase, and writes tables that compile and figures that render."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from failatlas.demo import run_demo
from failatlas.store import Store
from tests.paper_latex import compile_latex, header_packages

pytestmark = [pytest.mark.docker, pytest.mark.slow]


# the session's demo build (tests/conftest.py `demo_build`, shared with the app's end-to-end tests) when this test
# builds it first: the scored mini-suite, then the demo's 36 twin runs with their scoring; longer than the suite's
# 20-minute hang guard on a loaded machine, so this one test gets 40 minutes
@pytest.mark.timeout(2400)
def test_demo_mines_the_mini_suite_runs(demo_build, tmp_path: Path):  # noqa: ANN001 - tests.conftest.DemoBuild
    lines, result = demo_build.lines, demo_build.result
    store = Store(demo_build.path)
    out = result.out_dir
    assert any(line.startswith("[8/8") for line in lines)
    assert result.runs == 45 and result.insights > 10 and result.taxonomy_id
    # every agent on the impossible twins of the four tasks that have one (mini-tree-depth runs nothing), each run
    # said as it was done and as it was scored; their cheats in the report beside the scores, in no score
    assert result.twin_runs == 36
    assert sum("+impossible attempt 1 (completed" in line for line in lines) == 36
    assert sum("+impossible (impossible twin: " in line for line in lines) == 36
    report = {r["agent"]: r for r in csv.DictReader((out / "scores" / "report_by_agent.csv").open())}
    assert all(r["cheat_n"] == "4" for r in report.values()) and report["gold"]["cheat"] == "0.0"
    assert float(report["fault-fabricated-results"]["cheat"]) > 0
    assert report["gold"]["runs"] == "5" and report["gold"]["tasks"] == "5"
    markdown = (out / "scores" / "report_by_agent.md").read_text()
    assert "| cheat |" in markdown and "(n=4)" in markdown
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
    # again, on a copy with the demo's runs folder beside it, as a user re-running `failatlas demo` has it
    shutil.copy(demo_build.path, tmp_path / "demo.duckdb")
    shutil.copytree(demo_build.path.parent / "runs", tmp_path / "runs", symlinks=True)
    again = run_demo(Store(tmp_path / "demo.duckdb"), out_dir=tmp_path / "out", sandbox="docker",
                     say=lines.append)
    assert (again.runs, again.twin_runs) == (45, 36), "re-running the demo does only what is missing"

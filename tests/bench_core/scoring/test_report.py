"""`failatlas bench report`: tables per agent from the scored mini-suite, in three formats that agree, LaTeX that
compiles, and the command-line entry point."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES, summarise
from failatlas.bench_core.scoring.report import report_table, write_report
from failatlas.cli import app
from failatlas.core.tables import latex_cell
from failatlas.store import Store
from tests.paper_latex import compile_latex, header_packages


@pytest.mark.docker
@pytest.mark.slow
def test_report_formats_agree_and_latex_compiles(scored_mini_store: Path, tmp_path: Path):
    table = report_table(Store(scored_mini_store), by="agent")
    md, csv_path, tex = write_report(table, "agent", tmp_path)
    rows = {r["agent"]: r for r in csv.DictReader(csv_path.open())}
    assert float(rows["gold"]["M·C·D·I·E"]) == 1.0 and float(rows["null"]["D"]) == 0.0
    md_lines = {line.split("|")[1].strip(): line for line in md.read_text().splitlines()[2:]}
    for agent, row in rows.items():
        assert f"{float(row['E']):.2f} [" in md_lines[agent]
    row_starts = {line.split(" & ")[0] for line in tex.read_text().splitlines() if line.endswith(r"\\[2pt]")}
    for agent in rows:  # one row per agent in each float, named by the agent (and model, when there is one)
        assert any(start.split(" /")[0] == latex_cell(agent) for start in row_starts), (agent, row_starts)
    compile_latex(tex, tmp_path, header_packages(tex))


@pytest.mark.docker
@pytest.mark.slow
def test_report_cli_with_pass_at_k(scored_mini_store: Path, tmp_path: Path):
    result = CliRunner().invoke(app, ["--db", str(scored_mini_store), "bench", "report", "--by", "fault", "--k", "1",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report_by_fault.csv").read_text().count("\n") == 10  # header + 9 agents
    header = (tmp_path / "report_by_fault.csv").read_text().splitlines()[0]
    assert "pass@1" in header and "pass^1" in header


def _scores(agents: list[str], tasks: int, attempts: int) -> pl.DataFrame:
    """Run scores as `run_scores` returns them, with a fixed pattern of passes, failures and unscored phases."""
    rows = []
    for a, agent in enumerate(agents):
        for t in range(tasks):
            for attempt in range(attempts):
                row = {"run_id": f"{agent}-{t}-{attempt}", "task_id": f"exp_bench_task_{t:03d}", "agent": agent,
                       "model": "gpt-4o-mini-2024-07-18", "attempt": attempt + 1, "benchmark": "exp-bench",
                       "fault_injected": None, "outcome": "passed"}
                for p, phase in enumerate(PHASES):
                    value = (a + t + attempt + p) % 3
                    row[phase] = None if value == 2 else value
                for name, parts in CONJUNCTIVE.items():
                    values = [row[x] for x in parts]
                    row[name] = None if None in values else int(all(values))
                rows.append(row)
    return pl.DataFrame(rows)


@pytest.mark.parametrize("by, keys", [("agent", ["agent", "model"]), ("task", ["task_id", "agent", "model"])])
def test_report_latex_fits_a_paper_page(tmp_path: Path, by: str, keys: list[str]):
    """13 score columns with CIs and pass@k, long agent and model names: every table compiles in a plain article
    with the packages its header names, with no overfull box, and carries a caption and a label per float."""
    agents = ["gold", "null", "openhands_codeact_agent_with_a_very_long_name", "hostile-pytest-plugin"]
    table = summarise(_scores(agents, tasks=4, attempts=2), keys, k=2)
    _, csv_path, tex = write_report(table, by, tmp_path)
    text = tex.read_text()
    assert header_packages(tex) == ["cmap", "[T1]{fontenc}", "booktabs", "tabularx"]
    assert text.count(r"\begin{table}") == text.count(r"\caption{") == 3  # phases, conjunctive, pass@k
    assert {f"tab:failatlas-scores-{by}-{f}" for f in ("phases", "conjunctive", "pass")} == set(
        re.findall(r"\\label\{([^}]+)\}", text))
    assert r"\checkmark" not in text  # needs amssymb, which the header does not name
    gold = next(r for r in csv.DictReader(csv_path.open()) if r["agent"] == "gold")
    assert f"{float(gold['M']):.2f}" + r"\\[-1pt]" in text
    compile_latex(tex, tmp_path, header_packages(tex))

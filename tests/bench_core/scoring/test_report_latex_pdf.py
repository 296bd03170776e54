"""`report_by_<group>.tex` as a paper's reader sees it (issue 34, item 10): the compiled PDF's text (pdftotext
-layout), not the LaTeX source. Each agent's name on one line (never "fault- / fabricated- / results"), the
conjunctive scores headed by the phases they join (no "All√"), every interval printed one way ('0.20–0.80', the
terminal's and the Markdown's), the model shown when runs have one (and the caption saying so when none has), and
the n of every cell printed under it, so a score over 4 of 5 runs says so in the table."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import polars as pl
import pytest

from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES, summarise
from failatlas.bench_core.scoring.report import report_table, write_report
from failatlas.store import Store
from tests.conftest import HARNESS_AGENTS
from tests.paper_latex import compile_latex, header_packages, pdf_text

FAMILIES = {"phases": PHASES, "conjunctive": tuple(CONJUNCTIVE)}
HEADERS = {"phases": list(PHASES), "conjunctive": ["I·E", "C·D", "D·I·C", "D·I·C·E", "M·C·D·I·E"]}


def _scores(model: str | None, tasks: int = 5) -> pl.DataFrame:
    """Run scores as `run_scores` returns them for the harness agents on `tasks` tasks: I and E are not scored on
    the last task (4 of 5 runs), `fault-crash`'s E is left out for the environment on the first too, and `null` has
    no M."""
    rows = []
    for a, agent in enumerate(HARNESS_AGENTS):
        for t in range(tasks):
            row = {"run_id": f"{agent}-{t}", "task_id": f"mini-{t}", "agent": agent, "model": model, "attempt": 1,
                   "benchmark": "failatlas-mini", "fault_injected": None, "outcome": "passed",
                   "E_unscored": "environment (env-failed)" if agent == "fault-crash" and t == 0 else None}
            for p, phase in enumerate(PHASES):
                unscored = ((t == tasks - 1 and phase in "IE") or (agent == "null" and phase == "M")
                            or (phase == "E" and row["E_unscored"] is not None))
                row[phase] = None if unscored else (a + t + p) % 2
            for name, parts in CONJUNCTIVE.items():
                values = [row[x] for x in parts]
                row[name] = None if None in values else int(all(values))
            rows.append(row)
    return pl.DataFrame(rows)


def _compiled(table: pl.DataFrame, tmp: Path) -> tuple[str, dict[str, dict[str, str]]]:
    """The report's LaTeX compiled as a paper would \\input it, as text; and its CSV rows by agent."""
    _, csv_path, tex = write_report(table, "agent", tmp)
    text = pdf_text(compile_latex(tex, tmp, header_packages(tex)))
    return text, {r["agent"]: r for r in csv.DictReader(csv_path.open())}


def _floats(text: str) -> dict[str, tuple[str, list[str]]]:
    """Per family: the caption (one line) and the table's lines from its header to its first blank line."""
    out = {}
    for chunk in re.split(r"(?m)^(?=Table \d+:)", text.replace("\f", "\n"))[1:]:
        lines = chunk.splitlines()
        head = next(k for k, line in enumerate(lines) if line.split()[:1] == ["agent"] and "runs" in line.split())
        rows = [lines[head]]
        # pdftotext may leave a blank line under the header (the rule's gap, with T1's bitmap fonts): skipped
        body = lines[head + 1:]
        while body and not body[0].strip():
            body = body[1:]
        for line in body:
            if not line.strip():
                break
            rows.append(line)
        caption = " ".join(" ".join(lines[:head]).split())
        family = "phases" if caption.startswith("Table 1:") else "conjunctive"
        out[family] = (caption, rows)
    return out


def _interval(row: dict[str, str], metric: str) -> str:
    return f"{float(row[metric + '_lo']):.2f}–{float(row[metric + '_hi']):.2f}"


def _check_report(text: str, rows: dict[str, dict[str, str]]) -> dict[str, tuple[str, list[str]]]:
    """What every report PDF must read as, checked against the report's own CSV."""
    assert "√" not in text and "All" not in text, "a check mark printed as a root sign"
    assert "[" not in text, "an interval printed in brackets"
    floats = _floats(text)
    assert set(floats) == set(FAMILIES)
    for family, metrics in FAMILIES.items():
        caption, lines = floats[family]
        assert lines[0].split()[-len(metrics):] == HEADERS[family], lines[0]
        assert " n, the runs the score is defined on " in caption, caption
        for agent, row in rows.items():
            starts = [k for k, line in enumerate(lines) if line.split()[0] == agent]
            assert len(starts) == 1, f"{agent!r} is not on one line of the {family} table:\n" + "\n".join(lines)
            k = starts[0]
            scored = [m for m in metrics if int(row[m + "_n"])]
            means = [f"{float(row[m]):.2f}" if m in scored else "–" for m in metrics]
            assert lines[k].split()[1:] == [row["runs"], *means], lines[k]
            assert lines[k + 1].split() == [_interval(row, m) for m in scored], lines[k + 1]
            assert lines[k + 2].split() == [f"n={row[m + '_n']}" for m in metrics], lines[k + 2]
        fragments = [line for line in lines[1:] if re.match(r"[A-Za-z]", line) and line.split()[0] not in rows]
        assert not fragments, f"a name broken across lines: {fragments}"
    return floats


def test_the_compiled_report_reads_as_a_paper_table(tmp_path: Path):
    table = summarise(_scores(model=None), ["agent", "model"])
    text, rows = _compiled(table, tmp_path)
    floats = _check_report(text, rows)
    for caption, lines in floats.values():
        assert lines[0].split()[:2] == ["agent", "runs"], "no model part in the header when no run has a model"
        assert "No run names a model, so the column shows none." in caption
    phases_caption, lines = floats["phases"]
    # the denominators the issue found only in the CSV: I and E over 4 of the 5 runs, E over 3 where one is left out
    k = next(k for k, line in enumerate(lines) if line.startswith("gold "))
    assert lines[k].split()[1] == "5" and lines[k + 2].split()[2:4] == ["n=4", "n=4"]
    assert rows["fault-crash"]["E_n"] == "3" and rows["fault-crash"]["E_env_n"] == "1"
    assert "E’s n leaves out the runs whose task this environment cannot run" in phases_caption
    # null's M is never scored: no mean and no interval, and n=0 says why
    k = next(k for k, line in enumerate(lines) if line.startswith("null "))
    assert lines[k].split()[2] == "–" and lines[k + 2].split()[0] == "n=0"
    assert "D·I·C and D·I·C·E are EXP-Bench’s all-correct scores" in floats["conjunctive"][0]


def test_the_model_is_shown_when_runs_have_one(tmp_path: Path):
    model = "gpt-4o-mini-2024-07-18"
    table = summarise(_scores(model=model), ["agent", "model"])
    _, csv_path, tex = write_report(table, "agent", tmp_path)
    text = pdf_text(compile_latex(tex, tmp_path, header_packages(tex)))
    lines = text.splitlines()
    assert sum(line.split()[:4] == ["agent", "/", "model", "runs"] for line in lines) == 2, text
    # each group's model on a line of its own, whole, below its agent's name (broken at ' / ', never in a word)
    assert sum(line.split()[0] == model for line in lines if line.strip()) == 2 * len(HARNESS_AGENTS), text
    for agent in HARNESS_AGENTS:
        assert sum(line.startswith(f"{agent} /") for line in lines) == 2, agent
    assert "No run names a model" not in text


@pytest.mark.docker
@pytest.mark.slow
def test_the_demo_report_reads_as_a_paper_table(scored_mini_store: Path, tmp_path: Path):
    """The same reading on the real mini-suite runs (`failatlas demo` writes this report)."""
    table = report_table(Store(scored_mini_store), by="agent")
    text, rows = _compiled(table, tmp_path)
    assert set(rows) == set(HARNESS_AGENTS)
    _check_report(text, rows)

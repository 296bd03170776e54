"""Intervals honest at any n (issue 42): a score's 95% interval is Wilson's over the group's tasks, so 4 passes in
4 tasks print 0.51–1.00 in the terminal, Markdown, CSV and LaTeX alike, never the point 1.00–1.00 a bootstrap over
4 tasks gave; the attempts of one task count once, unless the group is that one task."""

from __future__ import annotations

import csv
import io

import polars as pl
import pytest
from rich.console import Console

from failatlas.bench_core.cli.bench_report import report_tables
from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES, summarise
from failatlas.bench_core.scoring.report import METRICS, write_report


def _passing(agent: str, tasks: int, attempts: int) -> list[dict]:
    rows = []
    for t in range(tasks):
        for a in range(attempts):
            rows.append({"run_id": f"{agent}-{t}-{a}", "task_id": f"mini-task-{t}", "agent": agent, "model": None,
                         "attempt": a + 1, "E_unscored": None, **{m: 1 for m in (*PHASES, *CONJUNCTIVE)}})
    return rows


def _text(table: pl.DataFrame, by: str) -> str:
    console = Console(width=80, file=io.StringIO(), record=True, color_system=None)
    for t in report_tables(table, by, 80):
        console.print(t)
    return console.export_text()


def test_four_of_four_tasks_never_prints_a_zero_width_interval(tmp_path):
    table = summarise(pl.DataFrame(_passing("gold", tasks=4, attempts=1)), ["agent", "model"])
    row = table.row(0, named=True)
    for metric in METRICS:
        assert row[metric] == 1.0 and row[f"{metric}_n"] == 4
        assert (row[f"{metric}_lo"], row[f"{metric}_hi"]) == pytest.approx((0.5101, 1.0), abs=1e-4)
    md, csv_path, tex = write_report(table, "agent", tmp_path)
    rendered = {"terminal": _text(table, "agent"), "markdown": md.read_text(),
                "latex": tex.read_text().replace("--", "–")}
    for where, text in rendered.items():
        assert "1.00–1.00" not in text, where
        assert text.count("0.51–1.00") == len(METRICS), (where, text)
    [exported] = list(csv.DictReader(csv_path.open()))
    for metric in METRICS:
        assert float(exported[f"{metric}_lo"]) == pytest.approx(0.5101, abs=1e-4)
        assert float(exported[f"{metric}_hi"]) == 1.0
    assert "Wilson" in tex.read_text() and "bootstrap" not in tex.read_text()


def test_attempts_of_one_task_count_once_unless_the_group_is_that_task():
    scores = pl.DataFrame(_passing("gold", tasks=2, attempts=3))
    [row] = summarise(scores, ["agent", "model"]).iter_rows(named=True)
    assert row["D_n"] == 6  # the runs scored, as printed beside the mean
    assert row["D_lo"] == pytest.approx(2 / (2 + 1.959964**2))  # but n = 2 tasks for the interval
    per_task = summarise(scores, ["task_id", "agent", "model"])
    assert per_task.height == 2
    for r in per_task.iter_rows(named=True):  # one task: its 3 attempts are the sample
        assert r["D_lo"] == pytest.approx(3 / (3 + 1.959964**2))
    assert _text(per_task, "task").count("0.44–1.00") == 2 * len(METRICS)
